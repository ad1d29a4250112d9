"""Credentials in URLs are never shown: userinfo with any characters, secret query parameters,
and URLs whose parts cannot be told apart; in single URLs, in text, in log lines and tracebacks,
and in the configuration errors the command line prints."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mcp_analysis.logging_setup import RedactingFormatter
from mcp_analysis.redact import Redactor, ambiguous, redact_url, redact_urls_in
from tests.conftest import run_cli

SECRET = "S3CRET-word"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://:{SECRET}@10.0.0.5:6379/0", "redis://***@10.0.0.5:6379/0"),
        (f"redis://default:{SECRET}@cache:6379/2", "redis://***@cache:6379/2"),
        (f"redis://:pa@ss:{SECRET}@cache:6379/0", "redis://***@cache:6379/0"),  # raw '@' and ':' in it
        (f"rediss://cache:6380/0?password={SECRET}", "rediss://cache:6380/0?password=***"),
        (f"redis://cache/0?db=1&PassWord={SECRET}&ssl=true", "redis://cache/0?db=1&PassWord=***&ssl=true"),
        (f"redis://cache/0?auth_token={SECRET}#part", "redis://cache/0?auth_token=***#part"),
        (f"redis://:p/ss-{SECRET}@cache:6379/0", "redis://***"),  # raw '/' in it: ambiguous
        (f"redis://:p?ss-{SECRET}@cache:6379/0", "redis://***"),
        (f"redis://:p#ss-{SECRET}@cache:6379/0", "redis://***"),
        ("unix:///run/redis.sock?db=1", "unix:///run/redis.sock?db=1"),
        ("redis://cache:6379/0", "redis://cache:6379/0"),
    ],
)
def test_a_url_is_shown_without_its_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_every_url_in_a_text_is_redacted_and_the_sentence_kept() -> None:
    text = f"cannot reach redis://u:{SECRET}@h:1/0, nor rediss://h:2/0?token={SECRET}."
    assert redact_urls_in(text) == "cannot reach redis://***@h:1/0, nor rediss://h:2/0?token=***."


def test_a_configured_urls_secrets_are_masked_even_without_the_url() -> None:
    # A client library's message may quote a host that is really the rest of a password cut at
    # its first '@', or echo the password alone.
    redactor = Redactor(f"redis://:pa@{SECRET}@127.0.0.1:6379/0")
    assert redactor.url == "redis://***@127.0.0.1:6379/0"
    said = redactor(f"Error connecting to {SECRET}@127.0.0.1:6379; AUTH pa@{SECRET} failed; pa%40{SECRET}")
    assert SECRET not in said and "127.0.0.1:6379" in said


def test_ambiguous_urls_are_recognised() -> None:
    assert ambiguous(f"redis://:a/b{SECRET}@h:1/0") and ambiguous("redis://:a b@h:1/0")
    assert not ambiguous(f"redis://:a@b{SECRET}@h:1/0") and not ambiguous("redis://h:1/0")


def test_log_lines_and_tracebacks_show_no_credentials() -> None:
    formatter = RedactingFormatter("%(message)s")
    try:
        raise ConnectionError(f"lost redis://:{SECRET}@h:1/0")
    except ConnectionError as exc:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "store %s", (f"rediss://h/0?password={SECRET}",), None
        )
        record.exc_info = (type(exc), exc, exc.__traceback__)
        line = formatter.format(record)
    assert SECRET not in line and "redis://***@h:1/0" in line and "password=***" in line


@pytest.mark.parametrize("url", [f"redis://:p/ss-{SECRET}@cache:6379/0", f"http://u:{SECRET}@cache:6379/0"])
def test_a_refused_store_url_is_named_without_its_password(url: str, tmp_path: Path) -> None:
    run = run_cli(
        "--db",
        str(tmp_path / "kb"),
        "list",
        env={"MCP_ANALYSIS_SESSIONS__STORE": url, "XDG_DATA_HOME": str(tmp_path)},
        timeout=120,
    )
    assert run.returncode != 0 and "sessions.store" in run.stderr, run.stderr
    assert SECRET not in run.stderr + run.stdout, run.stderr
