"""One strict reader per kind of input file: YAML, JSON, CSV tables, installed entry points."""
