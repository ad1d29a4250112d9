"""The package version: a leaf, so the server can name itself without importing the package facade."""

__version__ = "0.1.0"
