"""A real two-node Ray cluster on this machine, loopback only: the head on 127.0.0.2, a second node
on 127.0.0.3, one CPU each (Ray rewrites 127.0.0.1 to the machine's interface address, which
tests must not use). Each node is a `ray start --block` in a process group of its own, stopped by
ending that group; Ray's own processes that left the group are found by the RAY_TMPDIR given to
the nodes (an environment variable their children inherit) and ended too."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mcp_analysis.ingest.ray_address import UV_RUN_SWITCH, import_extra

HEAD_IP = "127.0.0.2"
NODE_IP = "127.0.0.3"
START_SECONDS = 180.0
_BIN = Path(sys.executable).parent


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class RayCluster:
    def __init__(self, log_dir: Path, nodes: int = 2, env: dict[str, str] | None = None) -> None:
        """`env`: more environment for the nodes (and so their workers), e.g. an object store's."""
        # Ray's Unix sockets live under RAY_TMPDIR and must stay under 108 bytes: a pytest tmp path is too long.
        self.tmpdir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
        self.log_dir = log_dir
        self.port = _free_port(HEAD_IP)
        self.address = f"{HEAD_IP}:{self.port}"
        self.client_port = _free_port(HEAD_IP)
        self.client_address = f"ray://{HEAD_IP}:{self.client_port}"  # Ray Client's server on the head
        ray_env = {"RAY_AUTH_MODE": "disabled", "RAY_TMPDIR": self.tmpdir, "RAY_USAGE_STATS_ENABLED": "0"}
        # Ray Client's server gives a client's own server process 30 s to start: too short on a loaded machine.
        ray_env["RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S"] = "180"
        # That process is forked from the multi-threaded client server; gRPC's fork handlers restart a
        # poller thread in the child, which dies (epoll_wait: Bad file descriptor) when its descriptors
        # are closed before the exec: on busy cores every Ray Client connection failed ("Starting Ray
        # client server failed"). Off, the child only execs. github.com/ray-project/ray/issues/63202
        ray_env["GRPC_ENABLE_FORK_SUPPORT"] = "0"
        # The nodes start from a suite run under `uv run`: a Ray Client's server process on the head (a
        # driver of its own, for the client) would apply Ray's uv hook with the head's working directory
        # ("Expected URI but received path"), as on a head started with `uv run ray start` (docs/deploying.md).
        ray_env[UV_RUN_SWITCH] = "0"
        self.env = {**os.environ, **(env or {}), **ray_env}
        self.nodes = nodes
        self.groups: list[subprocess.Popen[bytes]] = []

    def _start(self, name: str, *args: str) -> None:
        common = ("--num-cpus", "1", "--object-store-memory", str(100 * 1024 * 1024), "--block")
        with open(self.log_dir / f"{name}.log", "wb") as log:
            self.groups.append(
                subprocess.Popen(
                    [str(_BIN / "ray"), "start", *args, *common],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    start_new_session=True,  # its own process group, ended as one
                )
            )

    def start(self) -> None:
        self._start(
            "head",
            "--head",
            "--node-ip-address",
            HEAD_IP,
            "--port",
            str(self.port),
            "--ray-client-server-port",
            str(self.client_port),
            "--include-dashboard",
            "false",
        )
        self._wait_listening()
        if self.nodes > 1:
            self._start("node", "--address", self.address, "--node-ip-address", NODE_IP)
        self._wait_nodes()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.groups[0].poll() is not None:
                raise RuntimeError(f"ray start --head exited: {(self.log_dir / 'head.log').read_text()[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection((HEAD_IP, self.port), timeout=0.5):
                return
            time.sleep(0.2)
        raise RuntimeError(f"the Ray head did not listen on {self.address} within {START_SECONDS:g} s")

    def _wait_nodes(self) -> None:
        """Until the cluster reports every node alive (asked as a driver, then disconnected; the
        caller sets RAY_AUTH_MODE=disabled for this process). Ray is imported here as the product
        imports it (`import_extra`: without Ray's `uv run` hook, read once at import; the switch is
        set only around the import, so the drivers the tests start get the product's own default)."""
        ray = import_extra("ray")

        ray.init(address=self.address, log_to_driver=False, logging_level="WARNING")
        try:
            deadline = time.monotonic() + START_SECONDS
            while sum(1 for n in ray.nodes() if n["Alive"]) < self.nodes:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Ray cluster did not have {self.nodes} nodes within {START_SECONDS:g} s")
                time.sleep(0.2)
        finally:
            ray.shutdown()

    def _ours(self) -> list[int]:
        """Processes started with this cluster's RAY_TMPDIR (Ray's workers and their conversion workers)."""
        marker = f"RAY_TMPDIR={self.tmpdir}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                with contextlib.suppress(OSError):
                    if marker in (entry / "environ").read_bytes().split(b"\0"):
                        found.append(int(entry.name))
        return found

    def working_dir_copies(self) -> list[Path]:
        """The copies of a driver's working directory the nodes unpacked (Ray's `uv run` hook makes
        one per job's working directory, with a virtual environment built in it)."""
        return list(Path(self.tmpdir).glob("ray/session_*/runtime_resources/working_dir_files/*"))

    def kill_a_worker_running(self, title: str) -> int | None:
        """SIGKILL one of this cluster's processes whose title (Ray sets it to the task it runs) starts
        with `title`; its pid, or None when none runs one now."""
        for pid in self._ours():
            if _cmdline(pid).startswith(title.encode()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    return pid
        return None

    def titles_while(self, driver: subprocess.Popen[Any]) -> set[str]:
        """The titles this cluster's processes had (Ray sets a worker's to the task or actor it runs),
        looked at every 50 ms until `driver` has exited."""
        seen: set[str] = set()
        while driver.poll() is None:
            seen.update(_cmdline(pid).split(b"\0")[0].decode(errors="replace").strip() for pid in self._ours())
            time.sleep(0.05)
        return seen - {""}

    def wait_for_no_conversion_workers(self, timeout: float = 60.0) -> bool:
        """Whether every conversion worker process the nodes started has ended (Ray ends a job's
        workers once its driver is gone; their conversion workers then read EOF and exit)."""
        return self._wait_until_none(lambda line: b"mcp_analysis.ingest.worker" in line, timeout)

    def wait_for_none_titled(self, title: str, timeout: float = 60.0) -> bool:
        """Whether every process whose title starts with `title` has ended: a finished job's actors
        die after its driver has exited, a moment later on busy cores, so a test that watches the
        next job's titles waits for the last job's to be gone first."""
        return self._wait_until_none(lambda line: line.startswith(title.encode()), timeout)

    def _wait_until_none(self, matches: Callable[[bytes], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not any(matches(_cmdline(pid)) for pid in self._ours()):
                return True
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        for group in self.groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group.pid, signal.SIGTERM)
        # A moment for what ends on SIGTERM; the rest is killed: `ray start --block`, its raylet and
        # agents were all still alive 8 s after it (Ray 2.60), so a longer wait only delayed the kill.
        deadline = time.monotonic() + 1
        for group in self.groups:
            while _group_alive(group.pid) and time.monotonic() < deadline:  # Ray's servers outlive `ray start`
                group.poll()
                time.sleep(0.2)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group.pid, signal.SIGKILL)
            group.wait(timeout=10)
        for pid in self._ours():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@contextlib.contextmanager
def ray_cluster(log_dir: Path, nodes: int = 2, env: dict[str, str] | None = None) -> Iterator[RayCluster]:
    cluster = RayCluster(log_dir, nodes, env)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
