"""Examples' Spark modes, run as a user runs them (a subprocess from a fresh interpreter)."""
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_ad_click_join_chain_on_spark_equals_local_runner():
    result = subprocess.run([sys.executable, str(EXAMPLES / "ad_click_join.py"), "--spark"], capture_output=True,
                            text=True, timeout=900)  # (against a hang only)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "equal to the local runner's" in result.stdout and "CTR values" in result.stdout
    assert "Stage " not in result.stderr and "Python worker" not in result.stderr + result.stdout


def test_spark_declarative_pipelines_define_a_streaming_table_with_the_operator(tmp_path):
    result = subprocess.run([sys.executable, str(EXAMPLES / "sdp" / "run.py"), "--workdir", str(tmp_path / "sdp")],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Run is COMPLETED" in result.stdout and "equal to the local runner" in result.stdout
