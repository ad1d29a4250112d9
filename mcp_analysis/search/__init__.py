"""Hybrid search with context expansion."""
