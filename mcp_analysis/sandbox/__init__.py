"""Sandboxed Python over the documents: monty workers, the /documents VFS, host functions."""
