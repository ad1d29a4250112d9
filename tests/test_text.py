"""One-line summaries of multi-line messages keep the line that names the cause."""

from mcp_analysis.text import summary_line


def test_a_message_whose_first_line_ends_in_a_colon_keeps_its_last_line() -> None:
    # Ray Client's failure: the first line alone ("...from server:") says nothing.
    message = (
        "Initialization failure from server:\n"
        "Traceback (most recent call last):\n"
        '  File "proxier.py", line 700, in Datapath\n'
        "ConnectionError: the specific server did not start in 30 s\n"
    )
    assert summary_line(message) == (
        "Initialization failure from server: ConnectionError: the specific server did not start in 30 s"
    )


def test_one_line_messages_stay_as_they_are_and_blank_ones_are_empty() -> None:
    assert summary_line("  cannot   reach\tthe head  ") == "cannot reach the head"
    assert summary_line("\n \n") == ""


def test_each_kept_line_is_bounded() -> None:
    line = summary_line("a" * 1000 + "\n" + "b" * 1000, limit=50)
    assert line == "a" * 50 + " " + "b" * 50
