"""Reading the YAML files an operator gives us (config, tokens), bounded.

YAML anchors let a few hundred bytes stand for hundreds of millions of values (nine levels
of nine aliases: 387 million): PyYAML builds them as shared references in an instant, but
everything that then walks the data (``${VAR}`` expansion, settings validation, ``str()``
of a value in an error) runs for as long as it takes to visit each one. A file whose data
expands beyond `MAX_VALUES` is refused before anything walks it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_analysis.errors import ConfigError

MAX_VALUES = 100_000  # a real config or tokens file holds hundreds


def load_yaml(path: Path, what: str = "Config file") -> Any:
    """The parsed file; ConfigError (one line) when it is not YAML or expands too far."""
    import yaml  # only when a file is read: serving without one does not load PyYAML (~20 ms)

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"Cannot read {what.lower()} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not UTF-8 text: save it as UTF-8.") from None
    except yaml.YAMLError as exc:  # where, and what is wrong, never the line itself: it may hold a secret
        raise ConfigError(f"{what} {path} is not valid YAML{_where(exc)}.") from None
    except RecursionError:
        raise ConfigError(f"{what} {path} nests its values too deeply to be read.") from None
    if _expands_beyond(data, MAX_VALUES):
        raise ConfigError(
            f"{what} {path} expands to more than {MAX_VALUES:,} values (YAML anchors and aliases referring to "
            "each other); write the values out instead."
        )
    return data


def _expands_beyond(data: Any, limit: int) -> bool:
    """Whether visiting `data` as a tree (each alias once per reference) meets more than `limit` values."""
    count = 0
    stack = [data]
    while stack:
        item = stack.pop()
        count += 1
        if count > limit:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _where(error: Any) -> str:
    """Where a PyYAML error is (line, column) and what it is, without the text it quotes from the file."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None)
    place = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{place}: {problem}" if problem else place
