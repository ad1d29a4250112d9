"""`add --ray ADDRESS`: conversion and embedding on a Ray cluster, into the same knowledge base.

The local pipeline (pipeline.Ingestor) with three of its steps moved out of this process:

- each file is read, hashed and converted (parse, OCR, chunk) by a Ray task on a worker node,
  through the same bounded conversion worker child process a local add uses (ray_tasks.py), so
  the same per-file bounds hold; tasks are submitted ahead in file order (a bounded window), and
  the driver takes their results in that order;
- each batch is embedded by a pool of actors, one per node with CPUs (started with the job's first
  new, moved or changed file), each loading its embedder once, which also build the batch's rows (the
  local add's code, rows.py) and write them as Lance fragments, uncommitted.

The driver lists the files, decides what is unchanged, moved, new or replaced (the local rules, the
same code), and commits once, at the end of the job: each content table's fragments appended in one
commit, then one commit point for every document of the job (store/fragments.py). Until then
nothing of the job is visible: a driver killed mid-job leaves the knowledge base as it was (a rerun
does the whole job again). The driver holds one batch of content at a time (never the corpus) and
the job's meta rows. The knowledge base's ingest lock is held throughout. Files must be readable at
the same path on every node (a shared mount), object-store sources (sources.py) from every node:
each node looks at each source before any work is sent, and one that cannot stops the add, named.
Files whose bytes are those of a stored document are hashed on the cluster and not converted; one
the driver then finds to be neither unchanged nor moved (a copy) is converted by a second task.
"""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import AnalysisError, IngestError
from mcp_analysis.ingest.files import FileSignature, display_name
from mcp_analysis.ingest.moves import MovedFiles
from mcp_analysis.ingest.pipeline import Ingestor, IngestReport, ProgressSink, written
from mcp_analysis.ingest.pool import ConversionPool, ReadReply
from mcp_analysis.ingest.prepare import PreparedFile
from mcp_analysis.ingest.ray_address import check_reachable, import_extra, init_address
from mcp_analysis.ingest.ray_tasks import Converted, Embedding, convert_file, probe
from mcp_analysis.ingest.rows import PreparedDocument
from mcp_analysis.ingest.sources import ObjectPath, SourcePath, check_readable, is_object_uri, refusal
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.text import summary_line
from mcp_analysis.version import __version__

log = logging.getLogger(__name__)

STAGES = ("connecting", "listing", "conversion", "embedding", "writing", "commit", "indexing")
_TASKS_PER_CPU = 4  # conversion tasks in flight per cluster CPU: the nodes keep busy while the driver writes
_CONNECT_SECONDS = 120.0  # the nodes' answers to the version probe


def _slices(pending: list[PreparedDocument], parts: int) -> list[list[PreparedDocument]]:
    """`pending` cut in at most `parts` runs of documents in order, about as many chunks each."""
    total = sum(len(p.chunks) for p in pending) or 1
    slices: list[list[PreparedDocument]] = [[] for _ in range(parts)]
    seen = 0
    for document in pending:
        slices[min(parts - 1, seen * parts // total)].append(document)
        seen += len(document.chunks)
    return [part for part in slices if part]


def _one_line(exc: BaseException) -> str:
    return summary_line(str(exc)) or type(exc).__name__


class Cluster:
    """A connection to a Ray cluster, checked, and the embedding actors once a file needs them."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.ray = import_extra("ray")
        self.owned = False  # whether this ingest connected (and so disconnects at the end)
        self.cpus = 1
        self.nodes: list[str] = []  # ids of the alive nodes with CPUs
        self.convert: Any = None  # convert_file as a Ray task
        self.embedders: list[Any] = []

    def connect(self) -> None:
        """Join the cluster (in the caller's thread: Ray sets a signal handler in the main thread)."""
        ray = self.ray
        if not ray.is_initialized():  # else: the caller's own connection (Python API) is used as is
            target = init_address(self.address)
            check_reachable(self.address, target)
            options: dict[str, Any] = {"include_dashboard": False} if target == "local" else {}
            try:
                # Workers' output stays in the cluster's logs: this process's stdout may be `--json`.
                ray.init(address=target, log_to_driver=False, logging_level=logging.WARNING, **options)
            except Exception as exc:  # ConnectionError, a version mismatch (RuntimeError), a bad address
                raise AnalysisError(f"Cannot use the Ray cluster at {self.address}: {_one_line(exc)}") from None
            self.owned = True

    def check(self, sources: Sequence[str] = ()) -> None:
        """The nodes with CPUs, their versions, and that each can read the object-store `sources`
        (blocks: call from a thread)."""
        ray = self.ray
        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
        if not nodes:
            raise AnalysisError(f"The Ray cluster at {self.address} has no node with CPUs to convert files on.")
        self.cpus = int(sum(n["Resources"]["CPU"] for n in nodes))
        # Made once: each `ray.remote(...)` would export the function to the cluster again.
        self.convert = ray.remote(convert_file).options(num_cpus=1, scheduling_strategy="SPREAD")
        self._check_versions([n["NodeID"] for n in nodes], tuple(sources))
        self.nodes = [n["NodeID"] for n in nodes]

    def _on(self, node: str, soft: bool) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return NodeAffinitySchedulingStrategy(node, soft=soft)

    def _check_versions(self, nodes: Sequence[str], sources: tuple[str, ...]) -> None:
        """Every node must run this Python and this mcp-analysis: the driver and the workers exchange
        pickled objects of both (Ray itself refuses a cluster of another Ray or Python minor); and
        every node must reach the object-store `sources` (its own credentials, its own network)."""
        ray = self.ray
        task = ray.remote(probe)
        on = [task.options(num_cpus=0, scheduling_strategy=self._on(node, False)) for node in nodes]
        refs = [each.remote(sources) for each in on]
        try:
            answers = ray.get(refs, timeout=_CONNECT_SECONDS)
        except Exception as exc:
            raise AnalysisError(
                f"The Ray cluster's workers cannot run mcp-analysis ({_one_line(exc)}): install "
                f"mcp-analysis[ray] {__version__} on every node, with the driver's Python."
            ) from None
        here = {"python": platform.python_version(), "mcp-analysis": __version__}
        for answer in answers:
            for key, version in here.items():
                if answer[key] != version:
                    raise AnalysisError(
                        f"The Ray node {answer['host']} ({answer['node'][:12]}) runs {key} {answer[key]}, this "
                        f"driver {version}: install the same versions on the cluster and here."
                    )
            for source, reason in answer["unreadable"].items():
                raise AnalysisError(
                    f"The Ray node {answer['host']} ({answer['node'][:12]}) cannot read {source}: {reason} (the nodes "
                    "need the object store's credentials and endpoint, AWS_* in their environment, as this driver has)"
                )

    def cancel(self, refs: Sequence[Any]) -> None:
        for ref in refs:
            with contextlib.suppress(Exception):
                self.ray.cancel(ref, force=True)

    def start_embedders(self, name: str, base_url: str | None, dimension: int | None) -> list[Any]:
        """One embedding actor per node (it takes no CPU of the conversions' own: embedding waits on them),
        started by the first call: an add that finds every file unchanged starts none."""
        if not self.embedders:
            actor = self.ray.remote(Embedding)
            self.embedders = [
                actor.options(
                    num_cpus=0, max_restarts=1, max_task_retries=1, scheduling_strategy=self._on(node, True)
                ).remote(name, base_url, dimension)
                for node in self.nodes
            ]
        return self.embedders

    def close(self) -> None:
        for embedder in self.embedders:
            with contextlib.suppress(Exception):
                self.ray.kill(embedder)
        self.embedders = []
        if self.owned:
            self.ray.shutdown()
            self.owned = False


@dataclass
class _Job:
    """What one add holds for its commit at the end (store/fragments.py's `commit_fragments`)."""

    targets: dict[str, Any] | None = None
    fragments: dict[str, list[Any]] = field(default_factory=dict)
    metas: list[DocumentMeta] = field(default_factory=list)
    updated: list[DocumentMeta] = field(default_factory=list)
    report: IngestReport = field(default_factory=IngestReport)  # added, replaced, chunks once committed


@dataclass
class RayIngestReport(IngestReport):
    engine: str = "ray"
    nodes: int = 0  # distinct Ray nodes that ran conversion or embedding work
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage (see docs/command-line.md)


class _RemoteFile:
    """A conversion worker's interface (read, convert, drop) over one file's Ray task, for
    `Ingestor._read_and_convert`: the driver's decisions stay the local pipeline's code."""

    def __init__(self, ingestor: RayIngestor, path: SourcePath, ref: Any) -> None:
        self.ingestor = ingestor
        self.path = path
        self.ref = ref
        self.found: Converted | None = None

    def read(self, path: str, name: str) -> ReadReply:
        self.found = self.ingestor.result(self.ref, self.path)
        # A node's device and inode numbers are its own (an NFS client's, a copy's): the file is
        # confined by what the driver sees of it (its real path; its identity here, now).
        try:
            seen = self.found.signature if isinstance(self.path, ObjectPath) else FileSignature.of(os.lstat(path))
        except OSError:
            seen = self.found.signature
        return ReadReply(self.found.digest, self.found.size, seen)  # type: ignore[arg-type]

    def convert(self) -> PreparedFile:
        assert self.found is not None
        if self.found.prepared is not None:
            return self.found.prepared
        # Its bytes are a stored document's, yet it is neither that document unchanged nor moved (a copy).
        again = self.ingestor.result(self.ingestor.submit(self.path, frozenset()), self.path)
        if again.digest != self.found.digest or again.prepared is None:
            raise IngestError("it changed while it was being added; add it again")
        return again.prepared

    def drop(self) -> None:
        """Nothing is held: the task dropped the bytes it did not convert."""


class RayIngestor(Ingestor):
    """Adds files to one knowledge base, converting and embedding on a Ray cluster (see module docs)."""

    def __init__(self, kb: KnowledgeBase, address: str, progress: ProgressSink | None = None) -> None:
        settings = kb.settings.ingest
        # A pool that starts nothing: this engine converts on the cluster (ray_tasks.convert_file).
        super().__init__(kb, progress, pool=ConversionPool(settings.limits(), settings.chunk_tokens, size=0))
        self.address = address
        self.cluster: Cluster | None = None
        self.node_ids: set[str] = set()
        self.stages: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        self._ahead: deque[tuple[SourcePath, Any]] = deque()
        self._todo: deque[SourcePath] = deque()
        self._skip: Any = None  # the stored hashes, put in the object store once per add
        self._clock = 0.0
        self._job = _Job()

    async def add(
        self, paths: Sequence[Path | str], *, title: str | None = None, metadata: dict[str, Any] | None = None
    ) -> RayIngestReport:
        started = time.monotonic()
        self.kb.store.check_writable()  # before the cluster is asked for anything
        cluster = Cluster(self.address)
        self.cluster = cluster
        # Ray's driver prints the cluster's error reports ("A worker died...") on sys.stdout, which
        # is `--json`'s output or an MCP stdio wire: they go to stderr while this process is a driver.
        with contextlib.redirect_stdout(sys.stderr):
            return await self._add_on(cluster, started, paths, title, metadata)

    async def _add_on(
        self,
        cluster: Cluster,
        started: float,
        paths: Sequence[Path | str],
        title: str | None,
        metadata: dict[str, Any] | None,
    ) -> RayIngestReport:
        self._skip = None  # each add reads the hashes stored when it holds the lock
        try:
            sources = [os.fspath(p) for p in paths if is_object_uri(p)]
            await anyio.to_thread.run_sync(check_readable, sources)  # here first: then the nodes are asked
            cluster.connect()
            await anyio.to_thread.run_sync(cluster.check, sources)
            self.stages["connecting"] = time.monotonic() - started
            self._clock = time.monotonic()
            report = await super().add(paths, title=title, metadata=metadata)
        finally:
            cluster.cancel([ref for _, ref in self._ahead])  # an add that failed: the rest is not needed
            self._ahead.clear()
            await anyio.to_thread.run_sync(cluster.close)
        return RayIngestReport(
            **vars(report), nodes=len(self.node_ids), stages={k: round(v, 3) for k, v in self.stages.items()}
        )

    async def _add(self, files: list[SourcePath], *args: Any) -> None:
        self.stages["listing"] += time.monotonic() - self._clock
        self._todo = deque(files)
        self._job = _Job()
        await super()._add(files, *args)

    # ------------------------------------------------------------------ conversion on the cluster

    def submit(self, path: SourcePath, skip: Any) -> Any:
        """Start converting `path` on the cluster (its sha256 only, if that is in `skip`: a set of
        hashes, or a reference to one in the object store)."""
        assert self.cluster is not None
        task = self.cluster.convert
        chunk_tokens = self.kb.settings.ingest.chunk_tokens
        # A file as named, made absolute (the workers' directory is not ours), symlinks left for the read to judge.
        where = path.uri if isinstance(path, ObjectPath) else os.fspath(path.absolute())
        return task.remote(where, display_name(path.name), self.limits, chunk_tokens, skip)

    def _fill(self, skip: Any) -> None:
        """Keep the window of tasks ahead full, in file order (files refused here are never sent)."""
        assert self.cluster is not None
        while self._todo and len(self._ahead) < max(8, _TASKS_PER_CPU * self.cluster.cpus):
            path = self._todo.popleft()
            if refusal(path) is None:
                self._ahead.append((path, self.submit(path, skip)))

    async def _convert(
        self, pool: ConversionPool, path: SourcePath, existing: DocumentMeta | None, moves: MovedFiles
    ) -> tuple[str, PreparedFile | None, DocumentMeta | None]:
        if self._skip is None:  # under the ingest lock: the hashes stored now, sent to the cluster once
            assert self.cluster is not None
            stored = frozenset(m.content_hash for m in await self.kb.store.all_meta() if m.content_hash)
            self._skip = self.cluster.ray.put(stored)
        self._fill(self._skip)
        ref = None
        if any(ahead == path for ahead, _ in self._ahead):
            while ref is None:  # files before it were refused since they were sent: not needed
                ahead, candidate = self._ahead.popleft()
                ref = candidate if ahead == path else None
        self._fill(self._skip)
        remote = _RemoteFile(self, path, ref if ref is not None else self.submit(path, self._skip))
        if existing is None:
            self._embedders()  # a new file (or a moved one): the models load while it converts
        found = await self._read_and_convert(remote, path, existing, moves)  # type: ignore[arg-type]
        if found[1] is not None:
            self._embedders()  # a changed file
        return found

    def _embedders(self) -> list[Any]:
        assert self.cluster is not None
        settings = self.kb.store.settings
        dimension = settings.vector_dim if settings else None
        return self.cluster.start_embedders(self.kb.embedder_name, self.kb.embedder_base_url, dimension)

    def result(self, ref: Any, path: SourcePath) -> Converted:
        """A conversion task's result (blocks: called from a thread); a refusal is the file's IngestError."""
        assert self.cluster is not None
        try:
            found: Converted = self.cluster.ray.get(ref)
        except Exception as exc:  # the task failed past Ray's retries (a lost node, a worker that cannot start)
            raise AnalysisError(
                f"Converting {display_name(path)} on the Ray cluster failed: {_one_line(exc)}"
            ) from None
        self.node_ids.add(found.node)
        self.stages["conversion"] += found.seconds
        if found.refused is not None:
            raise IngestError(found.refused)
        return found

    # ------------------------------------------------------------------ embedding, writing, indexing

    async def _save_meta(self, *metas: DocumentMeta) -> None:
        """Held for the job's one commit point (`_finish`), with its new documents."""
        self._job.updated.extend(metas)

    async def _flush(self, pending: list[PreparedDocument], report: IngestReport, moves: MovedFiles) -> None:
        """The local add's `_flush`, with the rows embedded, built and written as Lance fragments by the
        embedding actors; the fragments are committed at the end of the job (`_finish`)."""
        assert self.cluster is not None
        await self._save_meta(*moves.take())
        if not pending:
            return
        if self.before_write is not None:
            await self.before_write()
        self._phase(f"embedding and writing {sum(len(p.chunks) for p in pending)} chunks of {len(pending)} documents")
        if self._job.targets is None:
            self._job.targets = await self.kb.store.fragment_targets()
        actors, targets = self._embedders(), self._job.targets
        refs = [actors[k].write.remote(part, targets) for k, part in enumerate(_slices(pending, len(actors)))]
        try:
            answers = await anyio.to_thread.run_sync(self.cluster.ray.get, refs)
        except Exception as exc:
            raise AnalysisError(f"Embedding and writing on the Ray cluster failed: {_one_line(exc)}") from None
        for node, embedding, writing, written_here in answers:
            self.node_ids.add(node)
            self.stages["embedding"] += embedding
            self.stages["writing"] += writing
            for table, found in written_here.items():
                self._job.fragments.setdefault(table, []).extend(found)
        self._job.metas.extend(p.meta for p in pending)
        written(pending, self._job.report)

    async def _finish(self, report: IngestReport) -> None:
        """The job's commits: each content table's fragments, then its one commit point."""
        job = self._job
        if not job.metas and not job.updated:
            return
        if self.before_write is not None:  # a lease may have gone while the cluster worked
            await self.before_write()
        started = time.monotonic()
        await self.kb.store.commit_fragments(job.metas, job.fragments, job.targets or {}, job.updated)
        self.stages["commit"] += time.monotonic() - started
        report.added += job.report.added
        report.replaced += job.report.replaced
        report.chunks += job.report.chunks

    async def _update_indexes(self, compact: bool = True) -> None:
        started = time.monotonic()
        await super()._update_indexes(compact)
        self.stages["indexing"] += time.monotonic() - started
