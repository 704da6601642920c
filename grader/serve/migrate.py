"""Bring a database to the newest schema with the migrations shipped in `grader.serve.migrations`."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

__all__ = ["MIGRATIONS", "upgrade"]

MIGRATIONS = Path(__file__).parent / "migrations"
"""The Alembic script folder inside the package."""


def upgrade(engine: Engine) -> None:
    """Run every migration not yet applied to ``engine``'s database (``alembic upgrade head``).

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
    """
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
