"""Files that are secrets, never documents: private keys and credential stores.

A folder a user adds (or watches) may hold a key or a cloud credentials file beside the documents:
text files without a suffix are a supported type, so `id_rsa` would become a searchable document
that every client whose filter covers the folder could read. Two checks, both cheap:

- by name (`named_secret`), before anything is read: the well-known names of SSH private keys and
  credential files. In a walked or watched folder such a file is left out, like a hidden one, and
  named in a warning; named on the command line, it is refused with the reason.
- by content (`key_block`), on the first bytes read: a text file that begins with a private key
  block (PEM, OpenSSH, PGP, PuTTY), whatever its name, is refused with the reason.

A document that merely quotes a key further down is not refused: only a file that is a key.
"""

from __future__ import annotations

import re

# SSH's default key names (ssh-keygen, `-t` of each kind), and credential stores found outside hidden
# folders: the AWS CLI's `credentials` when copied out of ~/.aws, netrc's Windows name.
_SSH_KEYS = frozenset({"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk", "id_xmss"})
_CREDENTIALS = frozenset({"credentials", "_netrc", ".netrc", ".pgpass", ".git-credentials"})
_KEY_BLOCK = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d+:)"
)
HEAD_BYTES = 4096  # how much of a file `key_block` looks at


def named_secret(name: str) -> str | None:
    """Why a file of this name is a secret ("named like an SSH private key"), or None."""
    if name in _SSH_KEYS:
        return "named like an SSH private key"
    if name in _CREDENTIALS:
        return "named like a credentials file"
    return None


def key_block(head: bytes) -> str | None:
    """Why a file beginning with `head` is a secret ("a private key (it begins with ...)"), or None."""
    found = _KEY_BLOCK.match(head[:HEAD_BYTES])
    if found is None:
        return None
    return f"a private key (it begins with {found.group(1).decode('ascii')})"
