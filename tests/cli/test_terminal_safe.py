"""The CLI shows control characters from untrusted text instead of sending them to the terminal."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from mcp_analysis.cli.output import _SafeConsole, escape, escape_line, for_stream, terminal_safe


def test_control_characters_are_shown_and_line_ends_and_tabs_kept() -> None:
    assert terminal_safe("a\tb\nc\r\nd") == "a\tb\nc\nd"
    shown = terminal_safe("\x1b]0;title\x07 \x1b[2J \x7f \x9b2J \rX")
    assert shown == "\\x1b]0;title\\x07 \\x1b[2J \\x7f \\x9b2J \\x0dX"
    assert terminal_safe("é ✓ 東京") == "é ✓ 東京"


def test_escape_neutralises_markup_and_control_characters() -> None:
    assert escape("[red]x\x1b[31m") == "\\[red]x\\x1b[31m"


def test_the_consoles_show_what_they_are_given_to_print() -> None:
    sink = io.StringIO()
    console = _SafeConsole(file=sink, soft_wrap=True, color_system=None)
    console.print("a\x1b]52;c;Zm9v\x07b", markup=False, highlight=False)
    assert sink.getvalue() == "a\\x1b]52;c;Zm9v\\x07b\n"


def test_a_programs_output_is_exact_into_a_pipe_and_shown_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert for_stream("x\x1b[2J", io.StringIO()) == "x\x1b[2J"
    assert for_stream("x\x1b[2J", Terminal()) == "x\\x1b[2J"


def test_a_name_printed_within_a_line_cannot_break_it() -> None:
    forged = "x\n9 added, 0 replaced -> everything fine\r\nbad.pdf [red]"
    assert escape_line(forged) == "x\\n9 added, 0 replaced -> everything fine\\nbad.pdf \\[red]"
    assert "\n" not in escape_line("a\x1b[2J\nb") and escape_line("a\tb") == "a\tb"


def test_a_value_put_into_a_log_line_cannot_forge_another() -> None:
    from mcp_analysis.logging_setup import RedactingFormatter

    sink = io.StringIO()
    handler = logging.StreamHandler(sink)
    handler.setFormatter(RedactingFormatter("%(levelname)s %(message)s"))
    log = logging.getLogger("mcp_analysis.test_forged_lines")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("%s is left out (%d)", Path("W/x\nERROR all keys leaked"), 3)
        log.warning("the format's own lines stay\n%(name)s", {"name": "a\x1b]0;t\x07"})
    finally:
        log.removeHandler(handler)
    assert sink.getvalue().splitlines() == [
        "WARNING W/x\\x0aERROR all keys leaked is left out (3)",
        "WARNING the format's own lines stay",
        "a\\x1b]0;t\\x07",
    ]
