"""A standalone cluster (a master and two one-core workers on 127.0.0.1, started from the scripts and
jars inside the pyspark package, shared by the module's tests) runs:

- `windowed-operator run --master spark://...`, which ships the library to the executors; the
  pipeline's output equals its output in local mode;
- the packed-venv recipe of docs/guides/clusters.md (venv-pack, ``--archives``), line for line;
- a query one of whose executors is SIGKILLed mid-batch, into a table equal to the local runner's.

The executors' Python must not find the library by itself, or a test proves nothing.  The repository
is installed editable (a ``.pth`` file in site-packages installs an import hook), so for ``run`` the
executors run Python through a wrapper that starts it with ``-S`` (no ``site``: no ``.pth`` files, so no
hook) and site-packages on PYTHONPATH (pyspark, pandas, pyarrow... still import); a probe checks that
this Python cannot import the library (it could after a non-editable install).  The driver (the CLI,
run with the repository on its PYTHONPATH) names the wrapper in PYSPARK_PYTHON, which Spark hands to
the executors; the master and the workers run in a temporary directory with no PYTHONPATH, so nothing
else leads an executor to the repository.  Without shipping, the run fails with "No module named
'windowed_operator'" in the executor's TransformWithStateInPandas worker.  The recipe's executors run
the venv's own Python (no system site-packages).
"""
import contextlib
import importlib.util
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from windowed_operator import cli
from windowed_operator.pipeline import load_pipeline
from windowed_operator.spark.pipeline_run import run_pipeline
from windowed_operator.spark.base.shipping import is_local_master, library_zip, shipping_conf

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = "clickstream_sessions"
TIMEOUT = 900  # seconds for any one step: against a hang only (the whole test takes about a minute, several
#               on a loaded 2-core machine, where one Spark batch can take 10-30 s)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
                                                            "SPARK_CONF_DIR", "MASTER")}
    return {**env, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1", **extra}


def wait_until(check, what: str, logs: list[Path], timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{what} not within {timeout} s; " + "".join(
        f"\n--- {log.name} ---\n{log.read_text()[-3000:]}" for log in logs if log.exists()))


@contextlib.contextmanager
def standalone_cluster(tmp_path: Path, workers: int = 1):
    """spark://127.0.0.1:PORT with ``workers`` workers (1 core, 1g each), stopped (with their executors)
    afterwards; yields the master's URL, the logs and the worker processes."""
    home = spark_home()
    spark_class = home / "bin" / "spark-class"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java (java on PATH or JAVA_HOME) to run a standalone Spark master and worker")
    if not spark_class.exists() or not (home / "jars").is_dir():
        pytest.skip(f"the pyspark package has no {spark_class} or jars/ to start a standalone cluster with")
    conf_dir = tmp_path / "conf"  # empty: no spark-env.sh or spark-defaults.conf from elsewhere
    conf_dir.mkdir(parents=True)
    env = clean_env(SPARK_CONF_DIR=str(conf_dir))
    port, ui = free_port(), free_port()
    logs = [tmp_path / "master.log", *[tmp_path / f"worker-{i}.log" for i in range(workers)]]
    processes: list = []

    def start(args, log):
        with open(log, "wb") as out:  # the child keeps its own descriptor
            processes.append(subprocess.Popen([str(spark_class), *args], cwd=tmp_path, env=env, stdout=out,
                                              stderr=subprocess.STDOUT, start_new_session=True))

    def alive_workers() -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as response:
            return json.load(response)["aliveworkers"]

    try:
        start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(ui)], logs[0])
        wait_until(lambda: alive_workers() == 0, "the master's web UI", logs)
        for i in range(workers):
            start(["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
                   "--port", str(free_port()), "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                   "--work-dir", str(tmp_path / ("worker" if workers == 1 else f"worker-{i}"))], logs[1 + i])
        wait_until(lambda: alive_workers() == workers, "the workers registering with the master", logs)
        yield f"spark://127.0.0.1:{port}", logs, processes[1:]
    finally:
        for process in reversed(processes):  # the workers first: they stop their executors
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=10)


@dataclass(frozen=True)
class Cluster:
    master: str
    root: Path  # the workers' directories: root/worker-N/APP_ID/EXECUTOR_ID/
    logs: list[Path]
    worker_pids: list[int]

    def apps(self) -> set[str]:
        return {app.name for app in self.root.glob("worker-*/app-*")}

    def app_dirs(self, since: set[str]) -> list[Path]:
        """The executor directories of the applications started after ``since`` was taken."""
        return [d for d in self.root.glob("worker-*/app-*/*") if d.parent.name not in since]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One standalone master and two one-core workers (``standalone_cluster``) for the module's tests,
    each running its application after the last one's ended (a start costs 10-20 s)."""
    root = tmp_path_factory.mktemp("cluster")
    with standalone_cluster(root, workers=2) as (master, logs, workers):
        yield Cluster(master, root, logs, [w.pid for w in workers])


def isolated_python(directory: Path) -> Path:
    """A Python for the executors: the same interpreter without ``site`` (so without the editable
    install's import hook), with site-packages on its path for pyspark, pandas, pyarrow, numpy..."""
    wrapper = directory / "python-without-site"
    site_packages = os.pathsep.join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site_packages}" '
                       f'exec "{sys.executable}" -S "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def pipeline_file(directory: Path, name: str) -> Path:
    """The example, its console sink replaced by JSON files (compared row by row below), reading six
    files a micro-batch (a few batches, not a dozen: each costs seconds on a busy machine)."""
    spec = yaml.safe_load((REPO / "examples" / "pipelines" / f"{EXAMPLE}.yaml").read_text())
    spec["checkpoint"] = f"checkpoints/{name}"
    for source in spec["sources"].values():
        source["files"]["max_files_per_trigger"] = 6
    spec["sinks"] = [{"input": spec["sinks"][0]["input"], "files": {"path": f"output/{name}", "format": "json"}}]
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def output_rows(directory: Path) -> Counter:
    rows = Counter()
    for part in directory.glob("part-*.json"):
        rows.update(json.dumps(json.loads(line), sort_keys=True) for line in part.read_text().splitlines() if line)
    return rows


def load_example(path: Path, name: str):
    """A module of ``examples/`` (not a package: loaded from its file)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate_example_data(root: Path) -> None:
    """The example's input under ``root/data/`` (``examples/pipelines/run.py generate``)."""
    load_example(REPO / "examples" / "pipelines" / "run.py", "pipeline_examples").generate(EXAMPLE, 200, root=root)


@contextlib.contextmanager
def in_background(args: list[str], log: Path, **popen):
    """``args`` started in a session of its own, its output in ``log``; killed (with its children) if
    still running when the block ends."""
    with open(log, "wb") as out:  # the child keeps its own descriptor
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **popen)
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_the_library_zip_holds_the_three_packages_and_imports_without_site_packages_hook(tmp_path, capsys):
    zip_path = library_zip(tmp_path)
    assert library_zip(tmp_path) == zip_path  # same content, same file: reruns reuse it
    assert cli.main(["ship", "--dir", str(tmp_path)]) == 0  # (the command the clusters guide gives)
    assert capsys.readouterr().out.strip() == str(zip_path)
    names = zipfile.ZipFile(zip_path).namelist()
    assert {"windowed_operator/__init__.py", "windowed_operator/spark/base/shipping.py", "triggers/__init__.py",
            "accumulations/__init__.py"} <= set(names)
    assert all(n.endswith(".py") and "__pycache__" not in n for n in names)
    code = "import windowed_operator, triggers, accumulations; print(windowed_operator.__file__)"
    result = subprocess.run([str(isolated_python(tmp_path)), "-c", code], cwd=tmp_path, capture_output=True,
                            text=True, env=clean_env(PYTHONPATH=str(zip_path)))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(str(zip_path))


def test_only_a_cluster_master_ships_the_library():
    assert is_local_master("local") and is_local_master("local[4]") and is_local_master("local[*, 3]")
    assert not is_local_master("spark://h:7077") and not is_local_master("local-cluster[2,1,1024]")
    assert shipping_conf("local[2]") == {} and shipping_conf("local[2]", py_files=[__file__]) == {
        "spark.submit.pyFiles": __file__}
    assert shipping_conf("spark://h:7077")["spark.submit.pyFiles"].endswith(".zip")


def test_local_defaults_apply_to_local_masters_only_and_the_users_settings_win():
    from windowed_operator.spark.base.session import session_conf

    local = session_conf("local[2]", extra_conf={"spark.driver.memory": "4g"})
    assert local["spark.sql.shuffle.partitions"] == "2" and local["spark.ui.enabled"] == "false"
    assert local["spark.driver.memory"] == "4g"
    cluster = session_conf("spark://host:7077")
    assert not {"spark.sql.shuffle.partitions", "spark.ui.enabled", "spark.driver.memory",
                "spark.sql.streaming.checkpointFileManagerClass"} & set(cluster)
    assert local["spark.sql.streaming.checkpointFileManagerClass"].endswith("FileSystemBasedCheckpointFileManager")
    assert cluster["spark.sql.streaming.stateStore.providerClass"].endswith("RocksDBStateStoreProvider")
    assert cluster["spark.ui.showConsoleProgress"] == "false"
    # changelog checkpointing on every master: a cluster job would snapshot every state store every batch
    changelog = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
    assert cluster[changelog] == "true" and local[changelog] == "true"
    assert session_conf("spark://host:7077", extra_conf={changelog: "false"})[changelog] == "false"  # (theirs wins)


def test_apply_names_a_setting_for_speed_the_session_lacks_in_one_line():
    """A session built elsewhere (a platform's) without changelog checkpointing runs, slower: the check
    apply() makes says so once, naming the setting, its value and how to set it."""
    import warnings

    from windowed_operator.spark.base.session import ROCKSDB_PROVIDER, SessionAdvice, check_session

    class Conf:
        def __init__(self, values):
            self.values = values

        def get(self, key, default=None):
            return self.values.get(key, default)

    class Session:
        conf = Conf({"spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER})

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_session(Session())
    advice = [str(w.message) for w in caught if issubclass(w.category, SessionAdvice)]
    assert len(advice) == 1 and "\n" not in advice[0]
    assert advice[0].startswith("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled is None: "
                                "set it to 'true'")
    assert "--conf spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=true" in advice[0]
    Session.conf.values["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] = "true"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_session(Session())
    assert not [w for w in caught if issubclass(w.category, SessionAdvice)]


def test_run_refuses_a_conf_without_equals_naming_it(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "pipeline.yaml", "--conf", "spark.executor.memory"])
    assert exc.value.code == 2
    assert "--conf: expected KEY=VALUE, got 'spark.executor.memory'" in capsys.readouterr().err


@pytest.mark.spark
def test_run_on_a_standalone_cluster_ships_the_library_and_equals_local_mode(spark, cluster, tmp_path):
    master, before = cluster.master, cluster.apps()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    generate_example_data(run_dir)

    python = isolated_python(tmp_path)
    probe = "import pyspark, pandas, pyarrow, numpy, pydantic, yaml; import windowed_operator"
    check = subprocess.run([str(python), "-c", probe], cwd=run_dir, env=clean_env(), capture_output=True, text=True)
    assert "No module named 'windowed_operator'" in check.stderr, (  # else the test below would prove nothing
        "the executors' Python must see pyspark & co. but not the library: " + check.stderr[-2000:])

    started = time.monotonic()
    log = tmp_path / "cluster.log"
    with in_background(
            [sys.executable, "-m", "windowed_operator.cli", "run", str(pipeline_file(run_dir, "cluster")),
             "--master", master, "--conf", "spark.executor.memory=768m", "--conf", "spark.ui.enabled=false",
             # on a cluster the user's settings decide (Spark's default is 200 shuffle partitions,
             # 200 state-store tasks a batch on this one-core worker)
             "--conf", "spark.sql.shuffle.partitions=2"], log,
            cwd=run_dir, env=clean_env(PYTHONPATH=str(REPO), PYSPARK_PYTHON=str(python),
                                       XDG_CACHE_HOME=str(tmp_path))) as driver:
        # Meanwhile, local mode in this process's shared session.
        run_pipeline(load_pipeline(pipeline_file(run_dir, "local")), spark=spark, out=io.StringIO())
        local_seconds = time.monotonic() - started
        code = driver.wait(timeout=TIMEOUT)
        assert code == 0, "the cluster run failed:\n" + log.read_text()[-6000:]
    cluster_seconds = time.monotonic() - started

    cluster_rows, local_rows = output_rows(run_dir / "output" / "cluster"), output_rows(run_dir / "output" / "local")
    assert local_rows and sum(local_rows.values()) > 20, "the example produced (almost) no panes"
    assert cluster_rows == local_rows
    # The panes were computed on the worker's executor, by a Python that imported the shipped zip.
    executors = cluster.app_dirs(since=before)
    assert [d for d in executors if (d / "stderr").exists()], "no executor ran on the workers"
    built = list((tmp_path / "windowed-operator").glob("windowed_operator-*.zip"))
    assert len(built) == 1, built
    assert [d for d in executors if (d / built[0].name).exists()], "the library zip did not reach the executors"
    print(f"local mode {local_seconds:.1f} s, cluster {cluster_seconds:.1f} s (side by side), "
          f"{sum(local_rows.values())} panes each")


@pytest.mark.spark
def test_an_executor_lost_mid_batch_loses_and_repeats_nothing(cluster, tmp_path):
    """Two workers, the key groups over 4 state partitions on both executors; one executor's JVM is
    SIGKILLed while the driver's sink reads a batch (its jobs running on the executors): the query
    finishes, and the table equals the local runner's (benchmarks/executor_loss.py; its loop of 10 kills
    is in benchmarks/results/executor_loss.txt)."""
    import random

    sys.path.insert(0, str(REPO / "benchmarks"))
    import executor_loss
    import table_sink_crash as crash

    batches = crash.make_batches(seed=3, n_batches=3)
    outcome = executor_loss.run_with_executor_kills(tmp_path / "run", cluster.master, cluster.worker_pids, batches,
                                                    kills=1, rng=random.Random(2), say=lambda _: None)
    assert len(outcome["kills"]) == 1, outcome
    expected = executor_loss.reference_rows(tmp_path, batches)
    assert len(expected) > 5
    assert crash.table_rows(tmp_path / "run" / "results.db", "sessions") == expected


def shipping_recipe() -> str:
    """The bash block of docs/guides/clusters.md that ships a packed virtual environment."""
    text = (REPO / "docs" / "guides" / "clusters.md").read_text()
    after = text.split("<!-- shipping recipe:", 1)[1]
    return after.split("```bash\n", 1)[1].split("```", 1)[0]


def library_source(directory: Path) -> Path:
    """A copy of what ``pip install`` builds the library from (pip builds in the directory it is given)."""
    directory.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, directory / name)
    for package in ("windowed_operator", "triggers", "accumulations"):
        shutil.copytree(REPO / package, directory / package, ignore=shutil.ignore_patterns("__pycache__"))
    return directory


@pytest.mark.spark
def test_the_docs_recipe_ships_a_packed_venv_with_archives(spark, cluster, tmp_path):
    """The recipe of docs/guides/clusters.md, line for line (its master and the library's path
    replaced): a venv with the library, packed by venv-pack, sent with ``--archives``; the executors'
    Python is the archive's (the workers have no other way to the library: no PYTHONPATH, and
    ``./job-env/bin/python`` exists only where the archive is unpacked).  The panes equal the same
    job's in local mode."""
    recipe = shipping_recipe()
    assert "spark://host:7077" in recipe and "/path/to/windowed-operator" in recipe
    run_dir = tmp_path / "run"
    (run_dir / "examples").mkdir(parents=True)
    shutil.copy(REPO / "examples" / "cluster_job.py", run_dir / "examples" / "cluster_job.py")
    generate_example_data(run_dir / "examples" / "pipelines")
    clicks = run_dir / "examples" / "pipelines" / "data" / EXAMPLE / "clicks"

    before = cluster.apps()
    script = recipe.replace("spark://host:7077", cluster.master).replace(
        "/path/to/windowed-operator", str(library_source(tmp_path / "library")))
    log = tmp_path / "recipe.log"
    env = clean_env(PATH=os.pathsep.join([str(Path(sys.executable).parent), str(spark_home() / "bin"),
                                          os.environ.get("PATH", "")]),
                    PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONHOME", None)
    started = time.monotonic()
    with in_background(["bash", "-euxc", script], log, cwd=run_dir, env=env) as recipe_run:
        # Meanwhile, the same job in local mode in this process's shared session.
        cluster_job = load_example(REPO / "examples" / "cluster_job.py", "cluster_job")
        cluster_job.start(spark, str(clicks), str(tmp_path / "local-out"), str(tmp_path / "local-ckpt")
                          ).awaitTermination(TIMEOUT)
        code = recipe_run.wait(timeout=TIMEOUT)
        assert code == 0, "the recipe failed:\n" + log.read_text()[-8000:]
    seconds = time.monotonic() - started
    # Each executor ran its Python workers from the unpacked archive.
    executors = cluster.app_dirs(since=before)
    assert executors and all((d / "job-env" / "bin" / "python").exists() for d in executors), executors
    assert all(list(d.glob("job-env/lib/python*/site-packages/windowed_operator/__init__.py")) for d in executors)

    cluster_rows, local_rows = output_rows(run_dir / "sessions-out"), output_rows(tmp_path / "local-out")
    assert local_rows and sum(local_rows.values()) > 20, "the job produced (almost) no panes"
    assert cluster_rows == local_rows
    print(f"the recipe (venv, pack, spark-submit) took {seconds:.1f} s; {sum(local_rows.values())} panes each")
