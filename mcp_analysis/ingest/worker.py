"""A conversion worker: a child process that reads and converts files, one at a time, under bounds.

Started by pool.py as ``python -m mcp_analysis.ingest.worker READ_FD WRITE_FD``; pickled messages
over two pipes (stdout is pointed at stderr, which the parent reads, so a library's stray print can
never reach a stdout that is an MCP wire, nor a native backtrace the host's log):

    parent                          child
    ("start", limits, chunk_tokens)  ("ready",)                        at once (no parser imported yet)
    ("warm",)                        ("warmed",) | ("error", kind, message)   parsers imported, memory capped
    ("read", path, name)             ("read", digest, size, signature) | ("error", kind, message)
    ("convert",)                     ("prepared", PreparedFile, retire) | ("error", kind, message)
    ("drop",)                        nothing: forget the bytes read

The parsers are imported on ("warm",), which the parent sends before the first ("convert",) (or
ahead, when it expects to convert): a worker that only reads and hashes files that turn out to be
unchanged (a `sync` or `add` again over the same folder) never pays for them.

`retire` is true when a converter caught a native panic (formats/native.py): the worker ends after
the reply, and the parent replaces it. `kind` is "refused" (the file cannot be used; the message
says why), "secret" (the file is a private key: ingest/secrets.py), "memory" (the file needed
more than `max_memory_mb`; the worker exits after saying so), "panic" (a Rust library panicked;
the worker exits after saying so) or "failed" (a parser bug). The
worker's private memory is capped (RLIMIT_DATA) at what it held after importing the parsers (less
a file's bytes read and waiting) plus `max_memory_mb`, and its CPU time per file (RLIMIT_CPU) at
`max_seconds`: the parent also watches the wall clock and the resident size, and kills the worker
past either.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import resource
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

from mcp_analysis.errors import AnalysisError, SecretFileError
from mcp_analysis.ingest import formats, sources
from mcp_analysis.ingest.formats import native
from mcp_analysis.ingest.formats.base import Source
from mcp_analysis.ingest.limits import MB, Limits
from mcp_analysis.ingest.secrets import content_secret
from mcp_analysis.logging_setup import configure_logging

log = logging.getLogger(__name__)

_PARSERS = (
    "docling.backend.html_backend",
    "docling.backend.md_backend",
    "docling.backend.msword_backend",
    "docling.pipeline.simple_pipeline",
    "pypdfium2",
    "mcp_analysis.ingest.prepare",
    *(f"mcp_analysis.ingest.formats.{family}" for family in ("markdown", "html", "docx", "pdf", "pdf_layout", "text")),
    "mcp_analysis.ingest.formats.code",
)
_SAMPLES = (("warm-up.md", b"# Title\n\nA paragraph.\n"), ("warm-up.html", b"<h1>Title</h1><p>A paragraph.</p>"))


def private_bytes() -> int | None:
    """This process's private writable memory (what RLIMIT_DATA counts; Linux), None elsewhere."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _warm_up() -> Any:
    """Import every parser once (the cost a short-lived process would pay per file) and load the tokenizer."""
    for module in _PARSERS:
        importlib.import_module(module)
    from mcp_analysis.embed.onnx_model import load_tokenizer
    from mcp_analysis.ingest.prepare import prepare

    tokenizer = load_tokenizer(max_tokens=100_000)
    for name, sample in _SAMPLES:  # first calls build lazily made parts; not a file's time to pay
        prepare(Source(sample, name), tokenizer, 256)
    return tokenizer


def _cap_memory(limits: Limits, held: int = 0) -> None:
    """Where the kernel counts it (Linux), allocations past the baseline + max_memory_mb fail at once,
    as MemoryError, before the parent's next look at the resident size. `held`: bytes of a file read
    before the cap, which count toward that file's bound, not the baseline."""
    baseline = private_bytes()
    if baseline is None:
        return
    cap = baseline - held + limits.max_memory_mb * MB
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))


def _cap_cpu(limits: Limits) -> None:
    """CPU seconds for the next file: a backstop to the parent's wall clock (SIGXCPU ends the worker)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = used.ru_utime + used.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(spent + limits.max_seconds) + 2
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


class _Worker:
    def __init__(self, outbox: Connection, limits: Limits, chunk_tokens: int) -> None:
        self.outbox = outbox
        self.limits = limits
        self.tokenizer: Any = None  # loaded with the parsers (`warm`)
        self.chunk_tokens = chunk_tokens
        self.pending: Source | None = None
        self.retire = False  # a native library panicked during the last file: end after it

    def read(self, path: str, name: str) -> None:
        self.pending = None

        def is_text(head: bytes) -> bool:
            return formats.for_file(name, head).text

        _cap_cpu(self.limits)
        read = sources.read_source(path, self.limits, is_text)
        if (secret := content_secret(read.data)) is not None:
            raise SecretFileError(f"it is {secret}: secrets are never added as documents")
        self.pending = Source(read.data, name, self.limits)
        self.outbox.send(("read", read.digest, len(read.data), read.signature))

    def warm(self) -> None:
        """Import the parsers and load the tokenizer (once), then cap memory there; a file read and
        waiting gets its CPU time afresh (the imports are not its to pay)."""
        if self.tokenizer is None:
            self.tokenizer = _warm_up()
            _cap_memory(self.limits, len(self.pending.data) if self.pending else 0)
            if self.pending is not None:
                _cap_cpu(self.limits)
        self.outbox.send(("warmed",))

    def convert(self) -> None:
        from mcp_analysis.ingest.prepare import prepare

        source, self.pending = self.pending, None
        if source is None:
            raise RuntimeError("convert without a file read")
        if self.tokenizer is None:
            raise RuntimeError("convert before the parsers were loaded (warm)")
        panics = native.count()
        prepared = prepare(source, self.tokenizer, self.chunk_tokens)
        self.retire = native.count() != panics
        self.outbox.send(("prepared", prepared, self.retire))


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `kind` is anywhere in the chain of causes (converters wrap what their parser raised)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def serve(inbox: Connection, outbox: Connection, worker: _Worker) -> None:
    while True:
        try:
            message = inbox.recv()
        except EOFError:
            return
        if message[0] == "drop":
            worker.pending = None
            continue
        try:
            if message[0] == "read":
                worker.read(message[1], message[2])
            elif message[0] == "warm":
                worker.warm()
            else:
                worker.convert()
                if worker.retire:
                    return
        except AnalysisError as exc:
            if not _caused_by(exc, MemoryError):
                outbox.send(("error", "secret" if isinstance(exc, SecretFileError) else "refused", str(exc)))
                continue
            worker.pending = None
            outbox.send(("error", "memory", ""))
            return
        except MemoryError:
            worker.pending = None
            outbox.send(("error", "memory", ""))
            return  # a heap that hit its cap may be left in any state: start afresh
        except RecursionError:
            outbox.send(("error", "depth", ""))
        except Exception as exc:  # a parser bug on one file must not end the others
            log.debug("Conversion failed", exc_info=True)
            outbox.send(("error", "failed", f"{type(exc).__name__}: {exc}"))
        except BaseException as exc:
            if not native.is_panic(exc):
                raise
            # A Rust library panicked (pyo3 raises it as a BaseException): its state may be broken, so this
            # worker says why in one line and ends; the next file gets a fresh one.
            log.debug("A native parser panicked", exc_info=True)
            worker.pending = None
            outbox.send(("error", "panic", " ".join(str(exc).split())[:200]))
            return


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it ends this worker
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a parser crash or SIGXCPU leaves no core file behind
    inbox = Connection(int(argv[1]), writable=False)
    outbox = Connection(int(argv[2]), readable=False)
    os.dup2(2, 1)
    # The parent's level (`--debug` shows the parsers' tracebacks; otherwise one line each).
    configure_logging(argv[3] if len(argv) > 3 else "WARNING")
    with contextlib.suppress(EOFError):
        _, limits, chunk_tokens = inbox.recv()
        outbox.send(("ready",))
        serve(inbox, outbox, _Worker(outbox, limits, chunk_tokens))


if __name__ == "__main__":
    main(sys.argv)
