"""The tokens file is followed while the server runs (server/auth.py): a token removed there is refused
from the next request on, a broken file refuses every token until fixed, and a file of tokens in
clear that other users may read is named in a warning."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from mcp_analysis.server import auth
from mcp_analysis.server.auth import TokenFileVerifier, warn_if_readable_by_others

pytestmark = pytest.mark.anyio

ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"


def write(path: Path, *names: str, stamp: int) -> None:
    """The tokens file with these principals (each token is its name's constant), its mtime `stamp`."""
    rows = "".join(f'  - name: {name}\n    token: "{name}-token-0123456789abcdef"\n' for name in names)
    path.write_text(f"tokens:\n{rows}")
    os.utime(path, ns=(stamp, stamp))  # a change within the file system's timestamp granularity is still seen


@pytest.fixture
def alice_and_bob(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, TokenFileVerifier]:
    """A tokens file of alice and bob, and its verifier looking at it at every request and taking a
    change whole at once."""
    monkeypatch.setattr(auth, "RECHECK_SECONDS", 0.0)
    monkeypatch.setattr(auth, "SETTLE_SECONDS", 0.0)
    tokens = tmp_path / "tokens.yaml"
    write(tokens, "alice", "bob", stamp=1_000_000_000)
    return tokens, TokenFileVerifier(tokens)


async def principal(verifier: TokenFileVerifier, token: str) -> str | None:
    found = await verifier.verify_token(token)
    return found.client_id if found is not None else None


async def test_a_token_removed_from_the_file_is_refused_and_one_added_accepted(
    alice_and_bob: tuple[Path, TokenFileVerifier],
) -> None:
    tokens, verifier = alice_and_bob
    assert [await principal(verifier, t) for t in (ALICE, BOB)] == ["alice", "bob"]
    write(tokens, "bob", "carol", stamp=2_000_000_000)  # alice revoked, carol added
    assert await principal(verifier, ALICE) is None
    assert await principal(verifier, BOB) == "bob"
    assert await principal(verifier, "carol-token-0123456789abcdef") == "carol"


async def test_a_broken_or_missing_file_refuses_every_token_until_fixed(
    alice_and_bob: tuple[Path, TokenFileVerifier], caplog: pytest.LogCaptureFixture
) -> None:
    tokens, verifier = alice_and_bob
    tokens.write_text("tokens:\n  - name: bob\n    token: short\n")  # a revocation with a mistake in it
    with caplog.at_level(logging.ERROR, logger="mcp_analysis.server.auth"):
        assert [await principal(verifier, t) for t in (ALICE, BOB)] == [None, None]
    assert "shorter than 16 characters" in caplog.text and "Every bearer token is refused" in caplog.text
    tokens.unlink()
    assert await principal(verifier, BOB) is None
    write(tokens, "bob", stamp=3_000_000_000)
    assert [await principal(verifier, t) for t in (ALICE, BOB)] == [None, "bob"]


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ('tokens:\n  - name: bob\n    token: "bob-token-0123456789abcdef"\n    filter: "uri = 1; x"\n', "filter"),
        ("tokens:\n  - name: bob\n    token: b\xf6b-token-0123456789abcdef\n".encode("latin-1"), "not UTF-8"),
        ("tokens: " + "[" * 5000 + "]" * 5000 + "\n", "tokens file"),  # nested past the parser's depth
    ],
)
async def test_any_mistake_in_a_changed_file_refuses_every_token(
    alice_and_bob: tuple[Path, TokenFileVerifier], caplog: pytest.LogCaptureFixture, broken: str | bytes, said: str
) -> None:
    """Whatever the mistake (a filter that is no SQL, another encoding, nesting too deep), the old tokens
    never come back: a request after the first is refused too."""
    tokens, verifier = alice_and_bob
    if isinstance(broken, bytes):
        tokens.write_bytes(broken)
    else:
        tokens.write_text(broken)
    with caplog.at_level(logging.ERROR, logger="mcp_analysis.server.auth"):
        assert [await principal(verifier, t) for t in (ALICE, BOB, ALICE, BOB)] == [None] * 4
    assert said in caplog.text.lower() or said in caplog.text


async def test_the_file_is_looked_at_once_per_recheck_period(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "RECHECK_SECONDS", 3600.0)
    tokens = tmp_path / "tokens.yaml"
    write(tokens, "alice", stamp=1_000_000_000)
    verifier = TokenFileVerifier(tokens)
    write(tokens, "bob", stamp=2_000_000_000)
    assert await principal(verifier, ALICE) == "alice"  # within the period: not read again yet
    monkeypatch.setattr(verifier, "_checked", verifier._checked - 3600.0)
    assert await principal(verifier, ALICE) is None


def test_tokens_in_clear_readable_by_others_are_warned_of(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clear, hashed = tmp_path / "clear.yaml", tmp_path / "hashed.yaml"
    write(clear, "alice", stamp=1_000_000_000)
    hashed.write_text(f"tokens:\n  - name: ops\n    token_sha256: {'ab' * 32}\n")
    with caplog.at_level(logging.WARNING, logger="mcp_analysis.server.auth"):
        for path, mode in ((clear, 0o644), (hashed, 0o644), (clear, 0o600)):
            path.chmod(mode)
            warn_if_readable_by_others(path, auth.load_tokens(path))
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and f"{clear} can be read by other users" in warned[0] and "644" in warned[0]


async def test_a_half_written_file_gives_no_token_more_than_both_versions_agree_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor half-way through saving: alice's entry without its filter line yet must not pass as a
    token with no filter (the whole knowledge base); once the file holds still, its version holds."""
    clock = [0.0]
    monkeypatch.setattr(auth, "_clock", lambda: clock[0])

    def save(text: str, at: float) -> None:
        tokens.write_text(text)
        os.utime(tokens, ns=(int(at * 1e9) + 10**9, int(at * 1e9) + 10**9))

    tokens = tmp_path / "tokens.yaml"
    whole = f'tokens:\n  - name: bob\n    token: "{BOB}"\n  - name: alice\n    token: "{ALICE}"\n'
    tokens.write_text(whole + "    filter: \"uri LIKE '%public%'\"\n")
    verifier = TokenFileVerifier(tokens)
    save(whole, at=10)  # written up to alice's token line
    clock[0] = 10.0
    assert await principal(verifier, ALICE) is None  # not both versions' alice: refused meanwhile
    clock[0] = 10.5
    assert await principal(verifier, BOB) == "bob"  # unchanged in both
    save(whole + "    filter: \"uri LIKE '%public%'\"\n", at=11)  # the save ends
    clock[0] = 11.0
    found = await verifier.verify_token(ALICE)
    assert found is not None and found.claims == {"filter": "uri LIKE '%public%'"}
    carol = "carol-token-0123456789abcdef"
    save(whole.replace("bob", "carol") + "    filter: x\n", at=20)
    clock[0] = 20.0
    assert await principal(verifier, carol) is None  # new: waits for the file to hold still
    clock[0] = 20.0 + auth.SETTLE_SECONDS
    assert await principal(verifier, carol) == "carol"
    assert await principal(verifier, BOB) is None  # bob's entry is gone from the settled file


async def test_a_broken_file_is_named_in_the_log_without_its_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(auth, "RECHECK_SECONDS", 0.0)
    monkeypatch.setattr(auth, "SETTLE_SECONDS", 0.0)
    tokens = tmp_path / "tokens.yaml"
    write(tokens, "bob", stamp=1_000_000_000)
    verifier = TokenFileVerifier(tokens)
    tokens.write_text(f'tokens:\n  - name: bob\n    token: "{BOB}\n')  # the closing quote lost
    with caplog.at_level(logging.ERROR, logger="mcp_analysis.server.auth"):
        assert await principal(verifier, BOB) is None
    assert "is not valid YAML at line 4, column 1: found unexpected end of stream" in caplog.text
    assert BOB not in caplog.text
    tokens.write_text('tokens:\n  - name: bob\n    token: "bob-token-0123456789abcdef"\n    filter: 5\n')
    with pytest.raises(auth.ConfigError, match="the filter of 'bob' must be a string"):
        auth.load_tokens(tokens)
