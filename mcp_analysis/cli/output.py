"""Where the CLI writes: results to stdout, everything else (errors, progress) to stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
