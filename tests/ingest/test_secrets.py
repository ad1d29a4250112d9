"""Secrets are never documents (ingest/secrets.py): the rules, and a folder walked with them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mcp_analysis.ingest.files import collect_files
from mcp_analysis.ingest.secrets import content_secret, key_block, named_secret, tokens_file
from mcp_analysis.watch.rules import FileRules

OPENSSH = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


@pytest.mark.parametrize(
    ("head", "begins"),
    [
        (OPENSSH, "-----BEGIN OPENSSH PRIVATE KEY-----"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n", "-----BEGIN RSA PRIVATE KEY-----"),
        ("\ufeff\n\n  -----BEGIN EC PRIVATE KEY-----\n", "-----BEGIN EC PRIVATE KEY-----"),
        ("-----BEGIN ENCRYPTED PRIVATE KEY-----\n", "-----BEGIN ENCRYPTED PRIVATE KEY-----"),
        ("-----BEGIN PRIVATE KEY-----\n", "-----BEGIN PRIVATE KEY-----"),
        ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n", "-----BEGIN PGP PRIVATE KEY BLOCK-----"),
        ("PuTTY-User-Key-File-3: ssh-ed25519\n", "PuTTY-User-Key-File-3:"),
        # What key tools write before the key: `openssl pkcs12 -nodes`, `openssl ecparam -genkey`, a
        # certificate and its key in one file (CRLF line ends), age-keygen's comments, ssh.com's format.
        (
            "Bag Attributes\n    localKeyID: 01 00 00 00\n    friendlyName: web\nKey Attributes: <No Attributes>\n"
            "-----BEGIN PRIVATE KEY-----\nMIIEvQ\n",
            "-----BEGIN PRIVATE KEY-----",
        ),
        (
            "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"
            "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n",
            "-----BEGIN EC PRIVATE KEY-----",
        ),
        (
            "subject=/CN=example.org\r\n-----BEGIN CERTIFICATE-----\r\nMIIB\r\n-----END CERTIFICATE-----\r\n"
            "\r\n-----BEGIN RSA PRIVATE KEY-----\r\nMIIE\r\n",
            "-----BEGIN RSA PRIVATE KEY-----",
        ),
        ("# created: 2024-01-01T00:00:00Z\n# public key: age1ql3z7h\nAGE-SECRET-KEY-1QQQQ7ZZ\n", "AGE-SECRET-KEY-1"),
        (
            '---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: "rsa-key"\nP2/56w\n',
            "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----",
        ),
    ],
)
def test_a_file_that_is_a_private_key_is_told_by_its_first_bytes(head: str, begins: str) -> None:
    assert key_block(head.encode("utf-8")) == f"a private key (it begins with {begins})"


@pytest.mark.parametrize(
    "head",
    [
        "# Rotating keys\n\nA key file begins with -----BEGIN OPENSSH PRIVATE KEY----- and ends ...\n",
        "-----BEGIN PUBLIC KEY-----\nMFkw\n",
        "-----BEGIN CERTIFICATE-----\nMIIB\n",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 me@host\n",
        "",
    ],
)
def test_a_document_quoting_a_key_and_public_material_are_not_secrets(head: str) -> None:
    assert key_block(head.encode("utf-8")) is None


def test_a_service_accounts_key_file_is_a_secret_and_other_json_is_not() -> None:
    account = (
        '{\n  "type": "service_account",\n  "private_key_id": "abc",\n'
        '  "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIE'
    )
    assert key_block(account.encode()) == 'a service account\'s key (it holds a "private_key")'
    assert key_block(b'{"type": "service_account", "client_email": "x@p.iam.gserviceaccount.com"}') is None
    assert key_block(b'{"docs": {"private_key": "-----BEGIN PRIVATE KEY-----"}}') is None  # nested: an example


@pytest.mark.parametrize(
    "head",
    [
        "Here is how a key file looks:\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n",  # prose before it
        "# Keys\n\nThe age tool prints AGE-SECRET-KEY-1 and then the key.\n",
        "private_key: -----BEGIN PRIVATE KEY-----\n",
    ],
)
def test_a_key_after_prose_is_quoted_not_a_key_file(head: str) -> None:
    assert key_block(head.encode("utf-8")) is None


TOKEN = '"admin-secret-token-0123456789"'
TOKENS_YAML = f"tokens:\n  - name: admin\n    token: {TOKEN}\n    filter: \"uri LIKE '%a%'\"\n"


@pytest.mark.parametrize(
    "text",
    [
        TOKENS_YAML,  # what `serve --tokens-file` reads, whatever the file's name
        "# who may call us\n---\ntokens:\n- name: ops\n  token_sha256: " + "9f86d081" * 8 + "\n",
        "#" + "x" * 5000 + f"\ntokens:\n  - name: a\n    token: {TOKEN}\n",  # a long comment first
        f"rows: &r\n  - name: a\n    token: {TOKEN}\ntokens: *r\n",  # an anchor
        f"{{tokens: [{{name: a, token: {TOKEN}}}]}}\n",  # flow style
        f"? tokens\n: - name: a\n    token: {TOKEN}\n",  # a complex key
        f"tokens:\r\n  - name: a\r\n    token:\r\n      {TOKEN}\r\n",  # CRLF, the value on the next line
        '\ufeff{"tokens": [{"name": "ops", "token": 12345678901234567890}]}',  # JSON, a number for a token
        f"tokens:\n  - name: a\n    token: short\n  - name: b\n    token: {TOKEN}\n",  # one entry broken
    ],
)
def test_a_bearer_tokens_file_is_a_secret_by_its_content(text: str) -> None:
    why = "a file of bearer tokens (a tokens list whose entries hold a token)"
    assert tokens_file(text.encode("utf-8")) == why
    assert content_secret(text.encode("utf-8")) == why


@pytest.mark.parametrize(
    "text",
    [
        "# Tokens\n\nWrite a file like this:\n\n```yaml\n" + TOKENS_YAML + "```\n",  # docs quoting one
        "---\ntitle: Notes\n" + TOKENS_YAML + "---\n# Notes\n\nProse.\n",  # front matter before prose
        '{"text": "The cat sat.", "tokens": [{"id": 0, "start": 0, "end": 3, "token": "The"}]}',  # a tokenizer's
        "text: The cat sat.\ntokens:\n  - token: The\n    pos: DET\n",
        '{"tokens": [{"name": "color.primary", "token": "#ff0000"}]}',  # design tokens
        '{"model": "m", "tokens": [], "auth": {"token": "a-long-token-of-someone-else"}}',
        "tokens:\n  - name: ops\n    filter: x\n",  # no token in it
        "apiVersion: v1\nkind: ConfigMap\ndata:\n  tokens: |\n    token: abc\n",
    ],
)
def test_documents_about_tokens_are_not_tokens_files(text: str) -> None:
    assert tokens_file(text.encode("utf-8")) is None


def test_secret_names_are_the_well_known_ones_only() -> None:
    for name in ("id_rsa", "id_ed25519", "id_ecdsa_sk", "credentials", ".netrc", "_netrc", ".git-credentials"):
        assert named_secret(name) is not None, name
    # Other spellings, and token files: any case, a credentials file's name with a prefix, .env files.
    for name in ("Credentials", "aws_credentials", "netrc", "git-credentials", ".env", ".env.local", "prod.env"):
        assert named_secret(name) is not None, name
    for name in (
        ".npmrc",
        ".pypirc",
        ".vault-token",
        "W/.docker/config.json",
        "W/.kube/config",
        ".config/gh/hosts.yml",
    ):
        assert named_secret(name) is not None, name
    for name in ("id_rsa.pub", "credentials.md", "README", "identity", "keys.txt", ".env.example", "config.json"):
        assert named_secret(name) is None, name
    assert named_secret("W/app/config") is None and named_secret("environment.md") is None


def test_a_walk_leaves_secrets_out_with_a_warning_and_refuses_one_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "W"
    (folder / "proj").mkdir(parents=True)
    (folder / "credentials").mkdir()  # a folder with a secret's name is entered: only files are left out by name
    for name in ("a.md", "id_rsa.pub", "proj/notes.txt", "credentials/rotation.md"):
        (folder / name).write_text("text\n")
    (folder / "id_rsa").write_text(OPENSSH)
    (folder / "proj" / "credentials").write_text("[default]\naws_secret_access_key = xyz\n")
    with caplog.at_level(logging.WARNING):
        files, skipped = collect_files([folder])
    found = sorted(p.relative_to(folder).as_posix() for p in files)
    assert found == ["a.md", "credentials/rotation.md", "id_rsa.pub", "proj/notes.txt"]
    assert skipped == []
    warned = " ".join(caplog.messages)
    assert "id_rsa is named like an SSH private key: left out, never read as a document" in warned
    assert "credentials is named like a credentials file: left out" in warned

    files, skipped = collect_files([folder / "id_rsa", folder / "a.md"])
    assert files == [folder / "a.md"]
    assert skipped == [
        (str(folder / "id_rsa"), "is named like an SSH private key: secrets are never added as documents")
    ]


def test_a_watched_folder_never_follows_a_secret() -> None:
    rules = FileRules(hidden=True)
    assert not rules.follows(Path("proj/credentials")) and not rules.follows(Path("id_ed25519"))
    assert not rules.follows(Path(".netrc"))
    assert rules.follows(Path("proj/credentials.md")) and rules.follows(Path("id_rsa.pub"))
    # A folder with a secret's name is entered, as `add` enters it: only files are left out by name.
    assert not rules.ignored(Path("credentials")) and rules.follows(Path("credentials/rotation.md"))
