"""The shell commands of the README and the documentation pages, run as a new user runs them: each
line of their bash blocks, as written, from the repository's root, in order (README first, then the
pages; the ones that need a cluster or are the install and test commands themselves are listed and
skipped, so a new command cannot slip past unnoticed); and the pages' python blocks marked
``<!-- test: spark -->``, run with a SparkSession."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docs_blocks import bash_commands, pages, python_blocks

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
#: Lines that cannot run here, and why (matched on the start of the command).
NOT_HERE = {
    "pip install": "the install itself (CI installs the same extras; the docs are built by tests/test_docs.py)",
    "python -m pytest": "this test suite",
    "windowed-operator run FILE --master spark://": "needs a standalone cluster (tests/spark/test_cluster.py)",
    "ZIP=$(windowed-operator ship)": "spark-submit to a cluster",
    "windowed-operator verify-restarts": "two runs with kills, 90 s (tests/spark/test_verify_restarts.py runs it)",
    "PYTHONPATH=$ZIP spark-submit": "spark-submit to a cluster",
    "windowed-operator repartition CHECKPOINT": "a stopped query's checkpoint (tests/spark/test_repartition.py)",
    "windowed-operator rescale CHECKPOINT": "a stopped query's checkpoint (tests/spark/test_repartition.py)",
    "python -m venv job-env": "the packed-venv recipe, for a cluster (tests/spark/test_cluster.py runs it)",
    "job-env/bin/": "the packed-venv recipe, for a cluster (tests/spark/test_cluster.py runs it)",
    "export PYSPARK_DRIVER_PYTHON=python PYSPARK_PYTHON=./job-env": "the packed-venv recipe (test_cluster.py)",
    "spark-submit --master spark://host:7077 --archives": "the packed-venv recipe (test_cluster.py)",
}
#: What Spark writes to a terminal that a user of the commands must not see.
NOISE = re.compile(r"\[Stage \d+|TransformWithStateInPandas Python worker|WARN |log4j|Traceback")


def readme_commands() -> list[str]:
    return bash_commands([ROOT / "README.md", *pages()])


def test_every_readme_command_runs_as_written_and_quietly():
    commands = readme_commands()
    runnable = [c for c in commands if not any(c.startswith(prefix) for prefix in NOT_HERE)]
    assert all(any(c.startswith(prefix) for c in commands) for prefix in NOT_HERE), "a skip rule matched no command"
    assert any(c.startswith("windowed-operator run") and c.endswith("--local") for c in runnable)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}  # the commands run the checkout's code, as an editable install does
    for command in runnable:
        command = command.replace("python ", f"{sys.executable} ", 1) if command.startswith("python ") else command
        result = subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        assert not NOISE.search(result.stderr) and not NOISE.search(result.stdout), f"{command}\n{result.stderr[-3000:]}"
        if command.startswith("windowed-operator run") and not command.endswith("--local"):
            assert re.search(r"clickstream_sessions_sessions_0: batch 0: \d+ rows in", result.stdout), result.stdout
            assert re.search(r"clickstream_sessions_sessions_0: \d+ batches, \d+ rows in", result.stdout)
        if command.startswith("windowed-operator state"):
            assert "key(s) with state" in result.stdout


def test_the_docs_spark_blocks_run(spark, tmp_path):
    """Each block marked ``spark`` runs as written, its relative directories (``clicks/`` read, one JSON
    file of clicks; ``ckpt/``, ``panes/``, and the two-sink query's ``typed-panes/``, ``late/``,
    ``outputs-ckpt/`` written) made absolute under a temporary directory, since
    Spark resolves relative paths from the JVM's directory; a query it starts runs its input and
    is stopped."""
    clicks = tmp_path / "clicks"
    clicks.mkdir()
    (clicks / "0.json").write_text("".join(
        f'{{"user": "u{i % 3}", "page": "p{i % 5}", "ts": "2026-01-01T00:00:{i:02d}"}}\n' for i in range(40)))
    ran = 0
    for page in pages():
        for i, (kind, code) in enumerate(python_blocks(page)):
            if kind != "spark":
                continue
            for directory in ("clicks/", "ckpt/", "panes/", "typed-panes/", "late/", "outputs-ckpt/"):
                code = code.replace(f'"{directory}"', f'"{tmp_path / directory}"')
            exec(compile(code, f"{page.name} block {i}", "exec"), {})
            for query in spark.streams.active:
                query.processAllAvailable()
                query.stop()
            ran += 1
    assert ran >= 1
    written = spark.read.parquet(str(tmp_path / "panes"))
    assert {"key", "window_start", "window_end", "value", "timing", "pane_index"} <= set(written.columns)
    assert written.count() > 0
    typed = spark.read.parquet(str(tmp_path / "typed-panes"))  # (the panes of the one-query write)
    assert typed.columns[:2] == ["key", "window_start"] and typed.count() > 0
