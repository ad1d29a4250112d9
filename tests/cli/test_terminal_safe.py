"""The CLI shows control characters from untrusted text instead of sending them to the terminal."""

from __future__ import annotations

import io

from mcp_analysis.cli.output import _SafeConsole, escape, for_stream, terminal_safe


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
