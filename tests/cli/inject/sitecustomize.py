"""Breaks one dependency of a CLI subprocess, to test what the user sees when something fails below the CLI.

Active only when MCP_ANALYSIS_TEST_BREAK=module:attribute.path is set and this directory is on
PYTHONPATH (tests/cli/test_commands.py does both): that attribute is replaced by a function raising
RuntimeError("injected failure").
"""

import importlib
import os

_target = os.environ.get("MCP_ANALYSIS_TEST_BREAK")
if _target:
    _module_name, _, _path = _target.partition(":")
    _owner = importlib.import_module(_module_name)
    *_parents, _name = _path.split(".")
    for _part in _parents:
        _owner = getattr(_owner, _part)

    def _broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected failure")

    setattr(_owner, _name, _broken)
