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
  or JSON whose `tokens` list holds an entry the server takes: a name, and a `token` of 16
  characters or more or a `token_sha256` digest),
  whatever its name: a process not given that file (a `sync` run by cron beside the server)
  cannot know its path.

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
HEAD_BYTES = 4096  # how much of a file `key_block` looks at
# A bearer tokens file is parsed (YAML, JSON being YAML) when it is small and names `tokens`: its
# layouts are too many for patterns (comments, anchors, flow style, complex keys), and documents
# about tokens (a tokenizer's output, design tokens) too like it for patterns to tell apart.
MAX_TOKENS_FILE_BYTES = 256 * 1024  # a tokens file holds tens of entries
# The entries of a tokens file, as server/auth.py reads them (kept here, below both, so that ingest
# refuses exactly what the server would take).
TOKEN_ENTRY_KEYS = frozenset({"name", "token", "token_sha256", "filter"})
MIN_TOKEN_CHARS = 16


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


def content_secret(data: bytes) -> str | None:
    """Why a file of content `data` is a secret (a private key, a tokens file), or None."""
    return key_block(data) or tokens_file(data)


def tokens_file(data: bytes) -> str | None:
    """Why `data` (a whole file) is a bearer tokens file, or None: YAML or JSON whose `tokens` list holds
    an entry `serve --tokens-file` would take (a name and a token or its digest, no key it refuses),
    whatever else the file holds (a file with one broken entry still holds the others' tokens)."""
    if len(data) > MAX_TOKENS_FILE_BYTES or b"tok" not in data:  # an escaped key (tok\x65ns) too
        return None
    import yaml  # only for a small file that names tokens

    try:
        parsed = yaml.load(data.decode("utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except Exception:  # not YAML, not UTF-8, nested too deep: not a file the server can read either
        return None
    rows = parsed.get("tokens") if isinstance(parsed, dict) else None
    if isinstance(rows, list) and any(_token_entry(row) for row in rows):
        return "a file of bearer tokens (a tokens list whose entries hold a token)"
    return None


def _sha256_digest(text: object) -> bool:
    """Whether a `token_sha256` value writes 32 bytes in hex, as server/auth.py reads it (`bytes.fromhex`)."""
    try:
        return len(bytes.fromhex(str(text))) == 32
    except ValueError:
        return False


def _token_entry(row: object) -> bool:
    """An entry server/auth.py takes: a name, and a token of `MIN_TOKEN_CHARS` or more or a sha256 digest."""
    if not isinstance(row, dict) or not set(row) <= TOKEN_ENTRY_KEYS or not row.get("name"):
        return False
    token, digest = row.get("token"), row.get("token_sha256")
    return (bool(token) and len(str(token)) >= MIN_TOKEN_CHARS) or (bool(digest) and _sha256_digest(digest))


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
