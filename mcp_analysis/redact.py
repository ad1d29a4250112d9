"""Credentials are never printed: every URL is shown with its secrets replaced by ``***``.

A URL carries credentials in its userinfo (``redis://user:password@host``, any characters,
raw ``@`` and ``:`` included) and in query parameters (``?password=...``, ``token``,
``secret``, ``key``, ``auth``, ``sig``..., any case). `redact_url` shows one URL with both
hidden; `redact_urls_in` does it for every URL inside a text (error messages, log lines);
`Redactor` also hides the secret values of one known URL wherever they appear without it
(a client library's error may quote a host that is really half a password). A URL whose
parts cannot be told apart (an ``@`` after its host: a password with a raw ``/``, ``?``,
``#`` or space) shows its scheme only: what cannot be parsed cannot be shown safely.

A leaf: imports nothing of the package, so every layer can use it wherever it prints.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
#: Query parameters whose values are credentials (matched anywhere in the name, any case).
SECRET_PARAMETER = re.compile(r"pass|pwd|token|secret|key|auth|cred|sig|session|user|login", re.IGNORECASE)
_URL = re.compile(r"""[A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>`]*""")
_TRAILING = ".,;:!?)]}"
_NUMERIC_PORT = re.compile(r"(\[[^\]]*\]|[^:\[\]]*)(:\d*)?")


def ambiguous(url: str) -> bool:
    """Whether `url`'s credentials cannot be located for sure (so only its scheme may be shown)."""
    return _parts(url) is None


def redact_url(url: str) -> str:
    """`url` with its userinfo and secret query values replaced by ``***`` (text without ``://`` as is)."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        return url
    parts = _parts(url)
    if parts is None:
        return f"{scheme}://{MASK}"
    userinfo, host, path, query, fragment = parts
    shown = f"{scheme}://" + (f"{MASK}@" if userinfo is not None else "") + host + path
    if query is not None:
        shown += "?" + "&".join(_redact_parameter(item) for item in query.split("&"))
    if fragment is not None:
        shown += "#" + fragment
    return shown


def redact_urls_in(text: str) -> str:
    """`text` with every URL in it redacted (trailing punctuation of the sentence kept)."""
    if "://" not in text:
        return text

    def one(match: re.Match[str]) -> str:
        found = match.group(0)
        core = found.rstrip(_TRAILING)
        return redact_url(core) + found[len(core) :]

    return _URL.sub(one, text)


class Redactor:
    """Redacts one configured URL's secrets from any text: the URL itself, and its secret values alone."""

    def __init__(self, url: str) -> None:
        self.url = redact_url(url)
        self._secrets = sorted(_secret_values(url), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        text = redact_urls_in(text)
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return text


def _parts(url: str) -> tuple[str | None, str, str, str | None, str | None] | None:
    """(userinfo or None, host[:port], path, query or None, fragment or None); None when ambiguous."""
    _, _, rest = url.partition("://")
    if any(c.isspace() for c in rest):
        return None
    netloc = re.match(r"[^/?#]*", rest).group(0)  # type: ignore[union-attr]  # always matches
    tail = rest[len(netloc) :]
    userinfo, at, host = netloc.rpartition("@")
    path, _, after = _split_once(tail, "?#")
    query: str | None = None
    fragment: str | None = None
    if tail[len(path) : len(path) + 1] == "?":
        query, _, fragment_text = after.partition("#")
        fragment = fragment_text if "#" in after else None
    elif tail[len(path) : len(path) + 1] == "#":
        fragment = after
    if not _NUMERIC_PORT.fullmatch(host):
        return None  # a "port" that is not a number: the rest of a password cut short
    if "@" in path and (at or not host):
        return None  # the path's '@' may end a password that held a raw '/'
    if fragment is not None and "@" in fragment:
        return None
    if query is not None and any("@" in item and not _secret_item(item) for item in query.split("&")):
        return None
    return (userinfo if at else None), host, path, query, fragment


def _split_once(text: str, separators: str) -> tuple[str, str, str]:
    """`text` split at the first of `separators`: (before, separator, after)."""
    for index, char in enumerate(text):
        if char in separators:
            return text[:index], char, text[index + 1 :]
    return text, "", ""


def _secret_item(item: str) -> bool:
    name, sep, _ = item.partition("=")
    return bool(sep) and bool(SECRET_PARAMETER.search(unquote(name)))


def _redact_parameter(item: str) -> str:
    return item.partition("=")[0] + "=" + MASK if _secret_item(item) else item


def _secret_values(url: str) -> set[str]:
    """The credential values in `url`, raw and percent-decoded (each at least 3 characters)."""
    _, sep, rest = url.partition("://")
    if not sep:
        return set()
    found: set[str] = set()
    parts = _parts(url)
    if parts is None:  # unknown layout: everything after the scheme, and its pieces, is secret
        found.add(rest)
        found.update(re.split(r"[@:/?#&=\s]+", rest))
    else:
        userinfo, _, _, query, _ = parts
        if userinfo is not None:
            found.add(userinfo)
            found.update(userinfo.split(":", 1))
            # what a parser splitting at the first '@' would show as the host's start
            found.update(piece for piece in re.split(r"[@:]", userinfo) if len(piece) >= 4)
        for item in (query or "").split("&"):
            if _secret_item(item):
                found.add(item.partition("=")[2])
    found |= {unquote(value) for value in found}
    return {value for value in found if len(value) >= 3}
