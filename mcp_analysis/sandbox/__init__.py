"""Sandboxed Python over the documents: monty workers, the /documents VFS, host functions.

Contract: sandboxed code reaches nothing but what this package hands it — the read-only
/documents tree of its corpus (vfs.py, filter applied), and bounded host functions
(host.py, modules.py, bounds.py) that return plain values. Prints are captured, never
written to the server's stdout. An interpreter's state survives every failure of a call
(timeout, memory, crash, cancel): it is dumped after each good call and reloaded from there.
Workers are pooled (pool.py), interpreters hibernate. Imports no session or server code.
"""
