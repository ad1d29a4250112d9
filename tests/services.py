"""Real backing services for the scale-out tests and bench, on loopback ports chosen here.

- `moto_s3()`: moto's S3-compatible server (``python -m moto.server``), a bucket made;
- `redis()`: Debian's ``redis-server`` (no persistence, loopback only);
- `TcpGate`: a TCP forwarder in front of either, which a test can cut and restore to
  play an outage (the service keeps its data, as a real network partition would).

Each starts a process and stops it on exit, even when the code inside fails.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

S3_ENV_BASE = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes] | None, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited early (code {process.returncode})")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not listen on port {port} within {timeout:g} s")
        time.sleep(0.05)


def stop(process: subprocess.Popen[bytes], timeout: float = 10) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class S3:
    endpoint: str
    bucket: str
    port: int

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        """What a process needs to reach the store (optionally through a gate)."""
        return {**S3_ENV_BASE, "AWS_ENDPOINT_URL": endpoint or self.endpoint, "AWS_ALLOW_HTTP": "true"}

    def upload_dir(self, local: Path, prefix: str) -> str:
        """Copy a local LanceDB directory to s3://bucket/prefix (faster than re-ingesting)."""
        import boto3

        client = boto3.client("s3", endpoint_url=self.endpoint, **_boto_credentials())
        for path in sorted(local.rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                client.upload_file(str(path), self.bucket, f"{prefix}/{path.relative_to(local).as_posix()}")
        return f"s3://{self.bucket}/{prefix}"

    def put(self, key: str, body: bytes) -> None:
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint, **_boto_credentials()).put_object(
            Bucket=self.bucket, Key=key, Body=body
        )


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": S3_ENV_BASE["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": S3_ENV_BASE["AWS_SECRET_ACCESS_KEY"],
        "region_name": S3_ENV_BASE["AWS_REGION"],
    }


@contextlib.contextmanager
def moto_s3(log_dir: Path, bucket: str = "kb-bucket") -> Iterator[S3]:
    port = free_port()
    with open(log_dir / f"moto-{port}.log", "wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_for_port(port, process, 60, "moto S3 server")
        import boto3

        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, **_boto_credentials()).create_bucket(Bucket=bucket)
        yield S3(endpoint, bucket, port)
    finally:
        stop(process)


def redis_server_binary() -> str:
    found = shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if Path(p).exists()), None
    )
    if found is None:
        raise RuntimeError("redis-server is not installed (Debian: apt-get install redis-server; .ci/run does it)")
    return found


@contextlib.contextmanager
def redis(log_dir: Path, port: int | None = None, **extra: str | int) -> Iterator[int]:
    """A throwaway redis-server on a free loopback port (or `port`: a restart on the same one);
    yields the port. `extra` are more options, e.g. ``maxmemory="8mb"`` or ``requirepass=...``
    (underscores become dashes)."""
    port = port or free_port()
    workdir = log_dir / f"redis-{port}"
    workdir.mkdir(exist_ok=True)
    options = {"port": port, "bind": "127.0.0.1", "save": "", "appendonly": "no", "daemonize": "no"}
    options.update({"dir": workdir, "logfile": workdir / "redis.log"})
    options.update({key.replace("_", "-"): value for key, value in extra.items()})
    process = subprocess.Popen(
        [redis_server_binary(), *(a for k, v in options.items() for a in (f"--{k}", str(v)))],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, 30, "redis-server")
        yield port
    finally:
        stop(process)


class TcpGate:
    """A loopback TCP forwarder to `target_port` that can be cut (refuse and drop) and restored."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and drop open ones: the service is unreachable."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def close(self) -> None:
        self.cut()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_RDWR)
            with self._lock:
                self._conns.discard(source)
            source.close()
