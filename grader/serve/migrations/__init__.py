"""Alembic migrations of the server's database, shipped inside the package and run on start."""
