"""The harness's version: a leaf module, so that any module may read it without importing the package's API."""

__version__ = "0.1.0"
