"""The built-in analysis agent (pydantic-ai) and the Python API around it."""
