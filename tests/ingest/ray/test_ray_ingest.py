"""`add --ray`: a real two-node Ray cluster (cluster.py), the real CLI, real conversion workers on
the nodes, the real embedder, LanceDB on disk; the knowledge base compared table by table with the
one a local `add` of the same files makes."""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lancedb
import pytest

from mcp_analysis.ingest.ray_address import UV_RUN_SWITCH
from mcp_analysis.sample import documents_dir
from mcp_analysis.store import schema
from tests.conftest import REPO, make_settings, run_cli, run_cli_at_once
from tests.ingest.ray.cluster import RayCluster, ray_cluster
from tests.ingest.ray.kb_snapshot import assert_same_knowledge_base, snapshot
from tests.services import S3, S3_ENV_BASE, TcpGate, moto_s3

pytestmark = pytest.mark.slow

if importlib.util.find_spec("ray") is None:
    raise ImportError(
        "tests/ingest/ray needs the optional Ray packages: run the suite with "
        "`python3 -m uv run --group dev --extra ray pytest`."
    )

RAY_ENV = {"RAY_AUTH_MODE": "disabled"}
TEST_KEYS = {
    "aws_access_key_id": S3_ENV_BASE["AWS_ACCESS_KEY_ID"],
    "aws_secret_access_key": S3_ENV_BASE["AWS_SECRET_ACCESS_KEY"],
}


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3]:
    with moto_s3(tmp_path_factory.mktemp("moto")) as started:
        yield started


@pytest.fixture(scope="module")
def nodes_gate(s3: S3) -> Iterator[TcpGate]:
    """The nodes reach the object store through this gate (the driver directly): cut, only they cannot."""
    gate = TcpGate(s3.port)
    yield gate
    gate.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, s3: S3, nodes_gate: TcpGate) -> Iterator[RayCluster]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_MODE", "disabled")  # for this process's own look at the nodes
        store = s3.env(f"http://127.0.0.1:{nodes_gate.port}")
        with ray_cluster(tmp_path_factory.mktemp("ray-logs"), env=store) as started:
            yield started


def add(db: Path | str, *args: str, env: dict[str, str] | None = None, **run: Any) -> tuple[int, dict[str, Any], str]:
    """`add ARGS --json` through `run_cli` (`run`: its `unset`, `launcher`), its exit code, report and stderr."""
    done = run_cli("--db", str(db), "add", *args, "--json", env={**RAY_ENV, **(env or {})}, timeout=600, **run)
    assert done.stdout.startswith("{"), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout), done.stderr


def add_under_uv_run(db: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """`add` as `python3 -m uv run mcp-analysis add ...` runs it: a `uv run` process its parent (what
    Ray's uv hook looks for), the environment without UV_RUN_SWITCH (the product's own default)."""
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "this test needs uv, which `.ci/run` installs (python3 -m pip install uv)"
    return add(db, *args, unset=[UV_RUN_SWITCH], launcher=[uv, "run", "--no-project", "--"])


# The module's first test: its timeout covers starting the two-node cluster too, then a local
# and a Ray add of a mixed folder with OCR (over 300 s in a CI run beside another long module).
@pytest.mark.timeout(900)
def test_a_ray_add_makes_the_knowledge_base_a_local_add_makes(cluster: RayCluster, tmp_path: Path) -> None:
    """The sample's documents (Markdown, text, HTML, PDF, a scanned page, DOCX, a workbook): the same
    rows in every table, the same vectors, the same indexes; then a rerun adds nothing, and a changed
    file and a moved one are found as a local add finds them."""
    folder = tmp_path / "documents"
    shutil.copytree(documents_dir(), folder)
    local_db, ray_db = tmp_path / "local.lancedb", tmp_path / "ray.lancedb"

    code, local, _ = add(local_db, str(folder))
    assert code == 0 and "engine" not in local  # without --ray, nothing changes
    code, remote, _ = add_under_uv_run(ray_db, str(folder), "--ray", cluster.address)
    assert code == 0, remote["skipped"]
    assert remote["engine"] == "ray" and remote["nodes"] == 2  # conversion and embedding ran on both nodes
    stages = ("connecting", "listing", "conversion", "embedding", "writing", "commit", "indexing")
    assert set(remote["stages"]) == set(stages) and all(s >= 0 for s in remote["stages"].values())
    assert sorted(remote["added"]) == sorted(local["added"]) and remote["chunks"] == local["chunks"]
    assert remote["stages"]["conversion"] > 0 and remote["stages"]["embedding"] > 0
    assert_same_knowledge_base(snapshot(ray_db), snapshot(local_db))
    # The workers ran the nodes' own installation: the driver, started by `uv run`, had none of its
    # working directory copied to the nodes (Ray's uv hook stays off).
    assert not cluster.working_dir_copies(), cluster.working_dir_copies()

    # The rerun finds every file unchanged: nothing to embed, so no embedding actor is started (the
    # first add's actors are waited out, so an embedding title seen below is the rerun's own).
    assert cluster.wait_for_none_titled("ray::Embedding"), "the first add's embedding actors outlived it"
    with (
        open(tmp_path / "out", "w+") as out,
        ray_add(ray_db, folder, cluster.address, RAY_ENV, "--json", stdout=out) as driver,
    ):
        titles = cluster.titles_while(driver)
        out.seek(0)
        again = json.loads(out.read())
    assert driver.returncode == 0
    assert not any(t.startswith("ray::Embedding") for t in titles), titles
    assert again["added"] == [] and again["replaced"] == [] and again["chunks"] == 0
    assert sorted(again["unchanged"]) == sorted(local["added"])

    changed = folder / "advisory-2025-04-phishing.txt"
    changed.write_text(changed.read_text() + "\nUpdate: the campaign ended in March.\n")
    (folder / "archive").mkdir()
    moved = (folder / "q1-2025-financial-report.md").rename(folder / "archive" / "q1-2025-financial-report.md")
    _, local_again, _ = add(local_db, str(folder))
    _, remote_again, _ = add(ray_db, str(folder), "--ray", cluster.address)
    assert remote_again["replaced"] == local_again["replaced"] == [changed.as_uri()]
    assert [new for _, new in remote_again["moved"]] == [moved.as_uri()] and remote_again["added"] == []
    assert_same_knowledge_base(snapshot(ray_db), snapshot(local_db))


def test_a_driver_killed_mid_job_leaves_the_knowledge_base_as_it_was_and_a_rerun_completes(
    cluster: RayCluster, tmp_path: Path
) -> None:
    """The knowledge base holds three documents; `add --ray` of their folder, where one of them
    changed, one moved and 40 files are new, is SIGKILLed once the workers have written fragments of
    several batches: every table is at the version it had and reads the same (no document of the
    job, no move); the job's conversion workers end on the nodes; a rerun makes the knowledge base a
    local add makes."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("changed", "moved", "kept"):
        (folder / f"{name}.md").write_text(f"# The {name} log\n\nBerth 4 was inspected for the {name} log.\n")
    small_batches = {**RAY_ENV, "MCP_ANALYSIS_INGEST__BATCH_DOCUMENTS": "2"}
    ray_db, local_db = tmp_path / "ray.lancedb", tmp_path / "local.lancedb"
    assert add(ray_db, str(folder))[0] == 0
    shutil.copytree(ray_db, local_db)  # the same knowledge base, for the local add to compare with
    before, versions = snapshot(ray_db), table_versions(ray_db)
    (folder / "changed.md").write_text("# The changed log\n\nBerth 4 is closed for repairs.\n")
    (folder / "archive").mkdir()
    (folder / "moved.md").rename(folder / "archive" / "moved.md")
    notes(folder / "notes", 40)
    data = ray_db / "chunks.lance" / "data"
    files_before = len(list(data.iterdir()))

    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    with ray_add(ray_db, folder, cluster.address, small_batches, **quiet) as driver:
        deadline = time.monotonic() + 300
        while len(list(data.iterdir())) < files_before + 6 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # the workers' fragments of three batches or more, uncommitted
        driver.kill()
    assert driver.returncode == -signal.SIGKILL, "the add finished before it could be killed"
    assert table_versions(ray_db) == versions  # nothing of the job committed, in any table
    assert_same_knowledge_base(snapshot(ray_db), before)
    assert cluster.wait_for_no_conversion_workers(), "the killed job's conversion workers outlived it"

    code, rerun, _ = add(ray_db, str(folder), "--ray", cluster.address, env=small_batches)
    assert code == 0 and len(rerun["added"]) == 40 and rerun["replaced"] == [(folder / "changed.md").as_uri()]
    assert rerun["moved"] == [[(folder / "moved.md").as_uri(), (folder / "archive" / "moved.md").as_uri()]]
    assert add(local_db, str(folder))[0] == 0  # the reference: the rows do not depend on the batches
    assert_same_knowledge_base(snapshot(ray_db), snapshot(local_db))


def test_a_ray_worker_killed_mid_task_is_retried(cluster: RayCluster, tmp_path: Path) -> None:
    """SIGKILL to a Ray worker process while it runs a conversion task: Ray runs the task again and
    the add completes with every file."""
    folder = notes(tmp_path / "docs", 30)
    db = tmp_path / "kb.lancedb"
    piped = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with ray_add(db, folder, cluster.address, RAY_ENV, "--json", **piped) as driver:
        killed = None
        deadline = time.monotonic() + 300
        while killed is None and driver.poll() is None and time.monotonic() < deadline:
            killed = cluster.kill_a_worker_running("ray::convert_file")
            time.sleep(0.05)
        out, err = driver.communicate(timeout=600)
    assert killed is not None, "no conversion task was seen running"
    assert driver.returncode == 0, err.decode()[-3000:]
    report = json.loads(out)
    assert len(report["added"]) == 30 and report["skipped"] == []


@contextlib.contextmanager
def ray_add(
    db: Path, folder: Path, address: str, env: dict[str, str], *extra: str, **popen: Any
) -> Iterator[subprocess.Popen[Any]]:
    """`add FOLDER --ray ADDRESS` running in a process of its own; killed on the way out if it still runs
    (a failed assertion leaves no driver behind)."""
    driver = subprocess.Popen(
        [sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(folder), "--ray", address, *extra],
        cwd=REPO,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        **popen,
    )
    try:
        yield driver
    finally:
        if driver.poll() is None:
            driver.kill()
        driver.wait(timeout=60)


def notes(folder: Path, count: int) -> Path:
    folder.mkdir()
    for n in range(count):
        text = f"# Note {n}\n\nBerth {n} was inspected; crane {n % 7} is in service.\n"
        (folder / f"note-{n:02d}.md").write_text(text)
    return folder


def table_versions(db: Path) -> dict[str, int]:
    tables = lancedb.connect(db)
    return {name: tables.open_table(name).version for name in schema.TABLES}


def committed(db: Path) -> int:
    """Documents visible in `db` now (0 before its tables exist)."""
    try:
        return int(lancedb.connect(db).open_table("document_meta").count_rows())
    except (FileNotFoundError, ValueError, RuntimeError, OSError):
        return 0


def test_a_ray_ingest_waits_for_the_lock_then_skips_hostile_files_by_name(cluster: RayCluster, tmp_path: Path) -> None:
    """Another writer holds the knowledge base's ingest lock (as a running `add` or watcher does):
    `add --ray auto` (RAY_ADDRESS) says it waits, writes nothing meanwhile, and completes once the
    lock is free. Files refused on the worker nodes under the driver's bounds, a .docx that is some
    other zip and a file over ingest.max_file_mb (set small here), are named in `skipped`; the
    other files are added."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "log.md").write_text("# Harbour Log\n\nThe pilot boarded at dawn.\n")
    (folder / "notes.txt").write_text("Crane 4 is back in service after the gearbox repair.\n")
    with zipfile.ZipFile(folder / "minutes.docx", "w") as fake:
        fake.writestr("readme.txt", "not a Word document")
    (folder / "big.txt").write_text("A line of a long log.\n" * 2000)  # ~44 KB
    db = tmp_path / "kb.lancedb"
    db.mkdir()
    bounds = {**RAY_ENV, "MCP_ANALYSIS_INGEST__MAX_FILE_MB": "0.02", "RAY_ADDRESS": cluster.address}
    with open(db / ".ingest.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        piped = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
        with ray_add(db, folder, "auto", bounds, "--json", **piped) as driver:  # auto: RAY_ADDRESS
            assert driver.stderr is not None
            said = ""
            while "Another ingest is writing to" not in said and driver.poll() is None:
                said = driver.stderr.readline()  # blocks until its next message (Ray may have its own first)
            assert "waiting for it to finish" in said
            time.sleep(1)  # a moment for it to write anything it would (nothing may be written while the lock is held)
            assert driver.poll() is None and committed(db) == 0
            fcntl.flock(lock, fcntl.LOCK_UN)
            out, err = driver.communicate(timeout=600)
    assert driver.returncode == 1 and out.startswith("{"), err[-3000:]
    report = json.loads(out)
    skipped = dict(report["skipped"])
    assert set(skipped) == {str(folder / "minutes.docx"), str(folder / "big.txt")}, err[-2000:]
    assert "ingest.max_file_mb" in skipped[str(folder / "big.txt")]
    assert sorted(report["added"]) == sorted((folder / n).as_uri() for n in ("log.md", "notes.txt"))
    assert report["engine"] == "ray" and committed(db) == 2


def test_an_s3_source_and_a_folder_into_an_s3_knowledge_base(
    cluster: RayCluster, s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`add s3://bucket/prefix/ FOLDER --ray ADDRESS --db s3://...` (moto's S3 server): the nodes read
    the objects (through their own endpoint) and the folder's files, a hostile object is skipped by
    name, the driver writes the knowledge base on the object store as a local add would (`list` reads
    it), and it is the one a local add of the same sources makes; a rerun adds nothing."""
    objects = {
        "log.md": b"# Harbour Log\n\nThe pilot boarded at dawn; crane 4 was repaired.\n",
        "sub/notes.txt": b"Crane 4 is back in service after the gearbox repair.\n",
        "page.html": b"<h1>Berth plan</h1><p>Berth 7 takes the ferry on Mondays.</p>",
        "nul.txt": b"text\x00more",
        ".hidden/keys.md": b"# Keys\n",
    }
    for key, body in objects.items():
        s3.put(f"ray-src/{key}", body)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "minutes.md").write_text("# Harbour Minutes\n\nThe pilot boarded at dawn.\n")
    (folder / "crane.txt").write_text("Crane 4 is back in service after the gearbox repair.\n")
    source, db = f"s3://{s3.bucket}/ray-src/", f"s3://{s3.bucket}/ray-kb"
    env = {**RAY_ENV, **s3.env()}
    code, remote, _ = add(db, source, str(folder), "--ray", cluster.address, env=env)
    assert code == 1 and remote["engine"] == "ray" and remote["nodes"] == 2
    files = sorted((folder / name).as_uri() for name in ("minutes.md", "crane.txt"))
    objects_added = sorted(f"{source}{key}" for key in ("log.md", "sub/notes.txt", "page.html"))
    assert sorted(remote["added"]) == sorted(objects_added + files)
    assert [name for name, _ in remote["skipped"]] == [f"{source}nul.txt"]
    listed = run_cli("--db", db, "list", "--json", env=s3.env())
    titles = ["Berth plan", "Harbour Log", "Harbour Minutes", "crane", "notes"]
    assert sorted(d["title"] for d in json.loads(listed.stdout)) == titles
    code, local, _ = add(tmp_path / "local.lancedb", source, str(folder), env=env)
    assert sorted(local["added"]) == sorted(remote["added"])
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)  # for this process's LanceDB to read the knowledge base on moto
    assert_same_knowledge_base(snapshot(db), snapshot(tmp_path / "local.lancedb"))
    code, again, _ = add(db, source, str(folder), "--ray", cluster.address, env=env)
    assert again["added"] == [] and again["chunks"] == 0 and len(again["unchanged"]) == 5


def test_a_source_the_nodes_cannot_read_stops_the_add_in_one_line(
    cluster: RayCluster, s3: S3, nodes_gate: TcpGate, tmp_path: Path
) -> None:
    """The driver lists the prefix, but the nodes' endpoint does not answer: one line naming a node and
    the source, before anything is written."""
    s3.put("unreachable/log.md", b"# Harbour Log\n\nThe pilot boarded at dawn.\n")
    db = tmp_path / "kb.lancedb"
    nodes_gate.cut()
    try:
        done = run_cli(
            "--db", str(db), "add", f"s3://{s3.bucket}/unreachable/", "--ray", cluster.address,
            env={**RAY_ENV, **s3.env()}, timeout=600,
        )  # fmt: skip
    finally:
        nodes_gate.restore()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("error: The Ray node ") and f"cannot read s3://{s3.bucket}/unreachable/" in said
    assert "AWS_* in their environment" in said
    assert not list(db.glob("*.lance"))


@contextlib.contextmanager
def credentials_checked(s3: S3) -> Iterator[dict[str, str]]:
    """moto checks every request's credentials (its IAM mode, `/moto-api/reset-auth`) until the end:
    the environment given holds the keys of an IAM user allowed everything on S3; the nodes' keys (the
    usual test keys, no IAM user's), other keys, or none are refused."""
    import boto3

    iam = boto3.client("iam", endpoint_url=s3.endpoint, region_name="us-east-1", **TEST_KEYS)
    name = f"driver-{os.getpid()}-{time.monotonic_ns()}"
    iam.create_user(UserName=name)
    allow = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    policy = iam.create_policy(PolicyName=name, PolicyDocument=json.dumps(allow))["Policy"]["Arn"]
    iam.attach_user_policy(UserName=name, PolicyArn=policy)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    checks_after(s3, b"0")
    try:
        yield {**s3.env(), "AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
    finally:
        checks_after(s3, b"inf")


def checks_after(s3: S3, requests: bytes) -> None:
    """moto checks credentials once it has answered this many more requests (b"inf": never)."""
    reset = urllib.request.Request(
        f"{s3.endpoint}/moto-api/reset-auth", data=requests, headers={"Content-Type": "application/octet-stream"}
    )
    urllib.request.urlopen(reset).close()


def without_credentials(env: dict[str, str], home: Path) -> dict[str, str]:
    """`env` with no AWS keys, no credentials file or profile, and the EC2 metadata service never asked
    (nothing may leave loopback)."""
    kept = {k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    nowhere = str(home / "no-such-file")
    return kept | {
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_SHARED_CREDENTIALS_FILE": nowhere,
        "AWS_CONFIG_FILE": nowhere,
    }


def objects_under(s3: S3, prefix: str) -> list[str]:
    import boto3

    client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1", **TEST_KEYS)
    return [o["Key"] for o in client.list_objects_v2(Bucket=s3.bucket, Prefix=prefix).get("Contents", [])]


def test_an_object_store_source_without_good_credentials_stops_the_add_in_one_line(
    cluster: RayCluster, s3: S3, tmp_path: Path
) -> None:
    """moto checks credentials: the driver's keys refused, or none, is one line naming the source and
    the environment to set (said before the nodes are asked); the driver's keys good and the nodes'
    refused is one line naming a node; nothing is written."""
    source, db = f"s3://{s3.bucket}/creds-src/", tmp_path / "kb.lancedb"
    s3.put("creds-src/log.md", b"# Harbour Log\n\nThe pilot boarded at dawn.\n")
    with credentials_checked(s3) as allowed:
        refused = {**RAY_ENV, **s3.env()}  # keys of no IAM user
        missing = without_credentials(refused, tmp_path)
        cases = {"refused": refused, "missing": missing, "nodes": {**RAY_ENV, **allowed}}
        said = {}
        args = ("--db", str(db), "add", source, "--ray", cluster.address)
        for case, done in run_cli_at_once({case: (args, env) for case, env in cases.items()}, timeout=600).items():
            assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
            said[case] = done.stderr.strip().splitlines()[-1]
    assert said["refused"].startswith(f"error: Cannot list {source}: the object store refused access with these")
    assert said["missing"].startswith(f"error: Cannot list {source}: ")
    assert all("AWS_ACCESS_KEY_ID" in said[case] for case in ("refused", "missing"))
    assert (
        said["nodes"].startswith("error: The Ray node ")
        and f"cannot read {source}: the object store refused" in said["nodes"]
    )
    assert "AWS_* in their environment" in said["nodes"]
    assert not list(db.glob("*.lance"))


def test_an_object_store_knowledge_base_without_good_credentials_is_one_line(
    cluster: RayCluster, s3: S3, tmp_path: Path
) -> None:
    """`--db s3://...` with keys moto refuses, or none: one line saying which, and nothing is written."""
    folder = notes(tmp_path / "docs", 2)
    prefix = "creds-kb"
    with credentials_checked(s3):
        refused = {**RAY_ENV, **s3.env()}
        cases = {"refused": refused, "missing": without_credentials(refused, tmp_path)}
        db = f"s3://{s3.bucket}/{prefix}"
        said = {}
        args = ("--db", db, "add", str(folder), "--ray", cluster.address)
        for case, done in run_cli_at_once({case: (args, env) for case, env in cases.items()}, timeout=600).items():
            assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
            said[case] = done.stderr.strip().splitlines()[-1]
    where = f"error: The knowledge base at s3://{s3.bucket}/{prefix} cannot be opened:"
    assert said["refused"].startswith(f"{where} the object store refused the credentials (InvalidAccessKeyId")
    assert said["missing"].startswith(f"{where} no credentials for the object store were found")
    assert objects_under(s3, prefix) == []


def test_a_driver_outside_the_cluster_adds_through_ray_client(cluster: RayCluster, tmp_path: Path) -> None:
    """`--ray ray://HOST:PORT` (Ray Client, the head's client server): the work runs on both nodes and
    the knowledge base is written."""
    folder = notes(tmp_path / "docs", 4)
    db = tmp_path / "kb.lancedb"
    code, report, stderr = add(db, str(folder), "--ray", cluster.client_address)
    assert code == 0, stderr[-3000:]
    assert (
        report["engine"] == "ray"
        and report["nodes"] == 2
        and sorted(report["added"]) == sorted((folder / f"note-{n:02d}.md").as_uri() for n in range(4))
    )
    assert committed(db) == 4


@pytest.mark.anyio
async def test_the_python_api_adds_on_the_cluster(cluster: RayCluster, tmp_path: Path) -> None:
    """`RayIngestor(kb, ADDRESS).add(paths)`, as docs/deploying.md shows it; the conversion workers
    the nodes started end with the job (none is left running once the add has returned)."""
    from mcp_analysis.corpus import KnowledgeBase
    from mcp_analysis.ingest.ray_engine import RayIngestor

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "log.md").write_text("# Harbour Log\n\nThe pilot boarded at dawn; crane 4 was repaired.\n")
    (folder / "page.html").write_text("<h1>Berth plan</h1><p>Berth 7 takes the ferry on Mondays.</p>")
    kb = await KnowledgeBase.open(make_settings(tmp_path / "kb.lancedb"), create=True)
    try:
        report = await RayIngestor(kb, cluster.address).add([folder])
        hits = await kb.store.all_meta()
    finally:
        await kb.close()
    assert report.engine == "ray" and len(report.added) == 2 and report.skipped == []
    assert sorted(m.title for m in hits) == ["Berth plan", "Harbour Log"]
    assert cluster.wait_for_no_conversion_workers(), "conversion workers outlived the job"


@pytest.mark.anyio
async def test_a_driver_of_another_version_is_refused_naming_the_node(
    cluster: RayCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nodes answer the probe with their versions; a driver on another mcp-analysis version (its
    own label changed here, the nodes untouched) stops before anything is written."""
    from mcp_analysis.corpus import KnowledgeBase
    from mcp_analysis.errors import AnalysisError
    from mcp_analysis.ingest import ray_engine
    from mcp_analysis.version import __version__

    monkeypatch.setattr(ray_engine, "__version__", "0.0.0-elsewhere")
    kb = await KnowledgeBase.open(make_settings(tmp_path / "kb.lancedb"), create=True)
    try:
        with pytest.raises(AnalysisError) as refused:
            await ray_engine.RayIngestor(kb, cluster.address).add([notes(tmp_path / "docs", 2)])
    finally:
        await kb.close()
    message = str(refused.value)
    assert f"runs mcp-analysis {__version__}, this driver 0.0.0-elsewhere" in message and "The Ray node " in message
    assert not list((tmp_path / "kb.lancedb").glob("*.lance"))  # no table made


def test_an_unreachable_cluster_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    with socket_closed() as address:
        done = run_cli("--db", str(tmp_path / "kb.lancedb"), "add", str(documents_dir()), "--ray", address, env=RAY_ENV)
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: Cannot reach the Ray cluster at {address}")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "kb.lancedb").exists()
    bad = run_cli("--db", str(tmp_path / "kb.lancedb"), "add", str(documents_dir()), "--ray", "head-node")
    assert bad.returncode == 1 and "--ray expects auto, local, HOST:PORT or ray://HOST:PORT" in bad.stderr


def test_add_ray_without_the_extra_says_what_to_install(tmp_path: Path) -> None:
    """The real CLI in an environment without Ray: `python -I -S` (no site-packages of its own) given
    this environment's packages except Ray's; one line naming the extra, nothing made."""
    import ray

    site = Path(ray.__file__).resolve().parent.parent
    without_ray = tmp_path / "site-packages"
    without_ray.mkdir()
    for entry in site.iterdir():
        if not entry.name.lower().startswith(("ray", "lance_ray", "lance-ray")):
            (without_ray / entry.name).symlink_to(entry)
    db = tmp_path / "kb.lancedb"
    code = (
        f"import sys; sys.path[:0] = [{str(REPO)!r}, {str(without_ray)!r}]; "
        "from mcp_analysis.cli.app import main; sys.argv[0] = 'mcp-analysis'; main()"
    )
    args = ["--db", str(db), "add", str(documents_dir()), "--ray", "auto"]
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: --ray needs the optional Ray packages, and the module 'ray' is not installed")
    assert "pip install 'mcp-analysis[ray]'" in done.stderr and not db.exists()


def test_without_the_extra_the_error_says_what_to_install() -> None:
    """What `--ray` says when an extra's module cannot be imported (a module no one has stands in for Ray)."""
    from mcp_analysis.errors import AnalysisError
    from mcp_analysis.ingest.ray_engine import import_extra

    with pytest.raises(AnalysisError) as missing:
        import_extra("ray_extra_module_that_is_not_installed")
    message = str(missing.value)
    assert "'ray_extra_module_that_is_not_installed' is not installed" in message
    assert "pip install 'mcp-analysis[ray]'" in message and "uv sync --extra ray" in message


class socket_closed:
    """A HOST:PORT on the head's loopback address that nothing listens on."""

    def __enter__(self) -> str:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.2", 0))  # bound, never listening: connections are refused
        return f"127.0.0.2:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


@pytest.mark.parametrize(("given", "ray_reads"), [(None, "False None"), ("1", "True 1")])
def test_rays_uv_run_hook_is_off_unless_the_environment_turns_it_on(given: str | None, ray_reads: str) -> None:
    """The driver imports Ray with its `uv run` hook off (the nodes run their own installation) and leaves
    no switch in its environment after, and an environment that sets the switch keeps its choice."""
    env = {k: v for k, v in os.environ.items() if k != UV_RUN_SWITCH}
    if given is not None:
        env[UV_RUN_SWITCH] = given
    program = (  # what Ray read, and what the processes this one starts would inherit
        "import os; from mcp_analysis.ingest.ray_address import import_extra; import_extra('ray'); "
        "from ray._private import ray_constants as c; "
        "print(c.RAY_ENABLE_UV_RUN_RUNTIME_ENV, os.environ.get('RAY_ENABLE_UV_RUN_RUNTIME_ENV'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ray_reads
