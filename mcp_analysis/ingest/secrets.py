"""Files that are secrets, never documents: private keys and credential stores.

A folder a user adds (or watches) may hold a key or a cloud credentials file beside the documents:
text files without a suffix are a supported type, so `id_rsa` would become a searchable document
that every client whose filter covers the folder could read. Two checks, both cheap:

- by name (`named_secret`), before anything is read: the well-known names of SSH private keys,
  credential stores and token files (`.env`, `.npmrc`, `~/.aws/credentials`, `.kube/config`...).
  In a walked or watched folder such a file is left out, like a hidden one, and named in a
  warning; named on the command line, it is refused with the reason.
- by content (`content_secret`), on the first bytes read: a text file that is a private key (PEM,
  OpenSSH, PGP, PuTTY, ssh.com, age), whatever its name, is refused with the reason. A key file
  may begin with what the tools that write it put first (openssl's "Bag Attributes", an EC
  PARAMETERS block, a certificate, comments); a JSON file holding a "private_key" (a cloud
  service account's key) is one too. So is a bearer tokens file of `serve --tokens-file` (YAML
  or JSON: a `tokens` list whose entries hold `token` or `token_sha256`), whatever its name: a
  process not given that file (a `sync` run by cron beside the server) cannot know its path.

A document that merely quotes a key or a tokens file after some prose is not refused: only a file
that is one.
"""

from __future__ import annotations

import re
from pathlib import PurePath

# SSH's default key names (ssh-keygen, `-t` of each kind), and credential stores found outside hidden
# folders: the AWS CLI's `credentials` when copied out of ~/.aws, netrc's Windows name.
_SSH_KEYS = frozenset({"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk", "id_xmss"})
_CREDENTIALS = frozenset(
    {"credentials", "_netrc", ".netrc", "netrc", ".pgpass", ".git-credentials", "git-credentials", ".vault-token"}
)
_TOKENS = frozenset({".env", ".npmrc", ".pypirc", ".dockercfg", ".htpasswd", ".s3cfg", ".boto"})
_TEMPLATES = frozenset({"example", "sample", "template", "dist", "defaults"})  # `.env.example`: no values
# A file known by its folder too: (folder, name) of tools' credential stores.
_IN_FOLDER = frozenset({(".docker", "config.json"), (".kube", "config"), ("gh", "hosts.yml"), (".aws", "config")})

_PRIVATE = re.compile(
    rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d+:"
    rb"|---- BEGIN SSH2 (?:ENCRYPTED )?PRIVATE KEY ----|AGE-SECRET-KEY-1[0-9A-Z]+"
)
# What key tools write before a key: openssl's attribute lines ("Bag Attributes", "    localKeyID: 01 00",
# "subject=/CN=x"), comments (age's "# public key: ..."), and whole blocks of other PEM kinds.
_PREAMBLE_LINE = re.compile(rb"\s*|#.*|(?:Bag|Key) Attributes(?::.*)?|\s+[\w.-][\w .-]*:.*|(?:subject|issuer)=.*")
_OTHER_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----")
_SERVICE_ACCOUNT = re.compile(rb'\A\s*\{[^{}]*"private_key"\s*:\s*"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----')
HEAD_BYTES = 4096  # how much of a file `content_secret` looks at
# A tokens file: a YAML mapping (comments, directives and document markers aside, every line at the
# left margin a key) whose `tokens` key lists entries with a token, or the same in JSON.
_YAML_SKIPPED = re.compile(rb"\s*(?:#.*)?|---.*|\.\.\.\s*|%.*")
_YAML_KEY = re.compile(rb"[\"']?[A-Za-z_][\w.-]*[\"']?\s*:(?:\s.*)?")
_TOKENS_KEY = re.compile(rb"[\"']?tokens[\"']?\s*:")
_TOKEN_KEY = re.compile(rb"(?:\A|[\s{,-])[\"']?token(?:_sha256)?[\"']?\s*:\s*\S")  # in a block or a flow mapping
_JSON_TOKENS = re.compile(rb'\A\s*\{.*?"tokens"\s*:\s*\[.*?"token(?:_sha256)?"\s*:\s*"', re.S)


def named_secret(path: str | PurePath) -> str | None:
    """Why a file of this name (a path's last parts) is a secret ("named like an SSH private key"), or None."""
    path = PurePath(path)
    name, folder = path.name.casefold(), path.parent.name.casefold()
    if name in _SSH_KEYS:
        return "named like an SSH private key"
    if name in _CREDENTIALS or (not PurePath(name).suffix and name.endswith(("_credentials", "-credentials"))):
        return "named like a credentials file"
    stem, _, variant = name.partition(".env.")
    if name in _TOKENS or name.endswith(".env") or (stem == "" and variant and variant not in _TEMPLATES):
        return "named like a file of tokens or keys"
    if (folder, name) in _IN_FOLDER:
        return f"named like a credentials file ({folder}/{name})"
    return None


def content_secret(head: bytes) -> str | None:
    """Why a file beginning with `head` is a secret (a private key, a tokens file), or None."""
    return key_block(head) or tokens_file(head)


def tokens_file(head: bytes) -> str | None:
    """Why a file beginning with `head` is a bearer tokens file, or None (see the module's docstring)."""
    head = head[:HEAD_BYTES].removeprefix(b"\xef\xbb\xbf")
    found = _JSON_TOKENS.match(head) is not None
    in_tokens = False
    for line in () if found else head.splitlines():
        if _YAML_SKIPPED.fullmatch(line):
            continue
        if not line[:1].isspace() and not line.startswith(b"-"):  # a key at the margin, or prose
            if _YAML_KEY.fullmatch(line) is None:
                return None
            key = _TOKENS_KEY.match(line)
            in_tokens = key is not None
            rest = line[key.end() :] if key is not None else b""  # `tokens: [{name: a, token: ...}]`
        else:
            rest = line if in_tokens else b""
        if _TOKEN_KEY.search(rest) is not None:
            found = True
            break
    return "a file of bearer tokens (a tokens list whose entries hold a token)" if found else None


def key_block(head: bytes) -> str | None:
    """Why a file beginning with `head` is a secret ("a private key (it begins with ...)"), or None."""
    head = head[:HEAD_BYTES].removeprefix(b"\xef\xbb\xbf")
    if _SERVICE_ACCOUNT.match(head) is not None:
        return 'a service account\'s key (it holds a "private_key")'
    found = _PRIVATE.search(head)
    if found is None or not _only_preamble(head[: found.start()]):
        return None
    marker = found.group(0).decode("ascii")
    if marker.startswith("AGE-SECRET-KEY-1"):
        marker = "AGE-SECRET-KEY-1"
    return f"a private key (it begins with {marker})"


def _only_preamble(before: bytes) -> bool:
    """`before` (what precedes a key's first line) is only what key tools write there."""
    lines = iter(before.splitlines())
    for line in lines:
        other = _OTHER_BLOCK.fullmatch(line.strip())
        if other is not None:  # EC PARAMETERS, CERTIFICATE...: skipped to its end
            end = b"-----END " + other.group(1) + b"-----"
            if not any(rest.strip() == end for rest in lines):
                return False
        elif _PREAMBLE_LINE.fullmatch(line) is None:
            return False
    return True
