"""Secrets are never documents (ingest/secrets.py): the rules, and a folder walked with them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mcp_analysis.ingest.files import collect_files
from mcp_analysis.ingest.secrets import key_block, named_secret
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


def test_secret_names_are_the_well_known_ones_only() -> None:
    for name in ("id_rsa", "id_ed25519", "id_ecdsa_sk", "credentials", ".netrc", "_netrc", ".git-credentials"):
        assert named_secret(name) is not None, name
    for name in ("id_rsa.pub", "credentials.md", "my_credentials", "README", "identity", "keys.txt"):
        assert named_secret(name) is None, name


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
