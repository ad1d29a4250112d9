"""Files an attacker (or bad luck) can put into a folder that is being added, built with real writers.

Each builder writes one hostile entry at `path` and returns it; tests/adversarial/test_ingest_files.py,
tests/ingest and bench/ingest_bounds.py use the same ones.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import zipfile
from pathlib import Path

MB = 1024 * 1024
GOOD_TEXT = "# Quay Report\n\nThe north quay was inspected on Monday; the fenders are sound.\n"


def fifo(path: Path) -> Path:
    """A named pipe: opening it for reading blocks until a writer comes, which none ever does."""
    os.mkfifo(path)
    return path


def unix_socket(path: Path) -> Path:
    """A listening Unix socket's file (left bound; the socket object is closed, the file stays)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.close()
    return path


def device_link(path: Path, device: str = "/dev/zero") -> Path:
    """A symlink with a text suffix to an endless device."""
    path.symlink_to(device)
    return path


def sparse_text(path: Path, size: int, head: str = "Header line of a log file.\n\n") -> Path:
    """A text head, then NUL bytes up to `size` (sparse: costs no disk)."""
    with path.open("wb") as handle:
        handle.write(head.encode())
        handle.truncate(size)
    return path


def many_paragraphs_docx(path: Path, paragraphs: int) -> Path:
    """A .docx written by python-docx whose body is then repeated to `paragraphs` tiny paragraphs.

    The zip deflates the repetition to almost nothing: 200,000 paragraphs make a file of a few
    hundred KB that unpacks to megabytes of XML."""
    from docx import Document

    document = Document()
    document.add_paragraph("x")
    buffer = io.BytesIO()
    document.save(buffer)
    with zipfile.ZipFile(buffer) as original:
        parts = {name: original.read(name) for name in original.namelist()}
    xml = parts["word/document.xml"].decode()
    start = xml.index("<w:p>") if "<w:p>" in xml else xml.index("<w:p ")
    end = xml.index("</w:p>", start) + len("</w:p>")
    parts["word/document.xml"] = (xml[:start] + xml[start:end] * paragraphs + xml[end:]).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as packed:
        for name, data in parts.items():
            packed.writestr(name, data)
    return path


def nested_html(path: Path, depth: int) -> Path:
    """`depth` nested <div> elements around one sentence."""
    path.write_text("<html><body>" + "<div>" * depth + "deep text" + "</div>" * depth + "</body></html>")
    return path


def symlink_loop(path: Path) -> Path:
    """`path` -> `path`.other -> `path`: resolving either never ends."""
    other = path.with_name(path.name + ".other")
    path.symlink_to(other)
    other.symlink_to(path)
    return path


def dangling_link(path: Path) -> Path:
    path.symlink_to(path.with_name("no-such-target.md"))
    return path


def many_tiny_paragraphs_text(path: Path, paragraphs: int) -> Path:
    """A text file of `paragraphs` one-word paragraphs (cheap to write, costly to model)."""
    path.write_bytes(b"word\n\n" * paragraphs)
    return path


def non_utf8_name(folder: Path, text: str = GOOD_TEXT) -> Path:
    """A Markdown file whose name is Latin-1 bytes (not valid UTF-8): b'caf\\xe9.md'."""
    path = folder / os.fsdecode(b"caf\xe9.md")  # a str holding a surrogate escape, as os.listdir gives it
    path.write_bytes(text.encode())
    return path


def deep_directories(folder: Path, levels: int, text: str = GOOD_TEXT) -> Path:
    """`levels` nested directories (a/a/a/...) with a Markdown file at the bottom; made relative to
    directory descriptors, so the process's working directory is never changed."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("a", dir_fd=fd)
            inner = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open("bottom.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, text.encode())
        os.close(leaf)
    finally:
        os.close(fd)
    return folder.joinpath(*["a"] * levels, "bottom.md")


def remove_deep_directories(folder: Path) -> None:
    """Undo `deep_directories` one level at a time: shutil.rmtree recurses once per level, and
    pytest's clean-up of old temporary folders would fail on the tree with RecursionError."""
    top = folder / "a"
    lifted = folder / "a.lifted"
    while top.is_dir():
        inner = top / "a"
        if inner.is_dir():
            inner.rename(lifted)
        shutil.rmtree(top)
        if lifted.is_dir():
            lifted.rename(top)
