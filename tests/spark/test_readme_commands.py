"""The README's shell commands, run as a new user runs them: each line of its bash blocks, as written,
from the repository's root, in order (the ones that need a cluster or are the install and test
commands themselves are listed and skipped, so a new command cannot slip past unnoticed)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
#: Lines that cannot run here, and why (matched on the start of the command).
NOT_HERE = {
    "pip install": "the install itself (CI installs the same extras)",
    "python -m pytest": "this test suite",
    "windowed-operator run FILE --master spark://": "needs a standalone cluster (tests/spark/test_cluster.py)",
    "ZIP=$(python -m windowed_operator.spark.shipping)": "spark-submit to a cluster",
    "PYTHONPATH=$ZIP spark-submit": "spark-submit to a cluster",
}
#: What Spark writes to a terminal that a user of the commands must not see.
NOISE = re.compile(r"\[Stage \d+|TransformWithStateInPandas Python worker|WARN |log4j|Traceback")


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command:
                commands.append(command)
    return commands


def test_every_readme_command_runs_as_written_and_quietly():
    commands = readme_commands()
    runnable = [c for c in commands if not any(c.startswith(prefix) for prefix in NOT_HERE)]
    assert len(commands) - len(runnable) == len(NOT_HERE), "a README command matched no skip rule, or two did"
    assert any(c.startswith("windowed-operator run") and c.endswith("--local") for c in runnable)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}  # the commands run the checkout's code, as an editable install does
    for command in runnable:
        command = command.replace("python ", f"{sys.executable} ", 1) if command.startswith("python ") else command
        result = subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
        assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        assert not NOISE.search(result.stderr) and not NOISE.search(result.stdout), f"{command}\n{result.stderr[-3000:]}"
        if command.startswith("windowed-operator run") and not command.endswith("--local"):
            assert re.search(r"clickstream_sessions_sessions_0: batch 0: \d+ rows in", result.stdout), result.stdout
            assert re.search(r"clickstream_sessions_sessions_0: \d+ batches, \d+ rows in", result.stdout)
        if command.startswith("windowed-operator state"):
            assert "key(s) with state" in result.stdout
