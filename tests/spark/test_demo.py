"""The README's first command: the demo runs on local Spark and prints its table and late count."""
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark


def test_demo_runs_and_reports(tmp_path):
    plot = tmp_path / "timeline.png"
    result = subprocess.run([sys.executable, "-m", "windowed_operator.cli", "demo", "--workdir", str(tmp_path),
                             "--plot", str(plot)],
                            capture_output=True, text=True, timeout=900)  # (against a hang only)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "Session panes" in out and "retractions" in out and "late-data count:" in out
    assert "ON_TIME" in out and "EARLY" in out and "LATE" in out
    assert "pane timeline of" in out and plot.read_bytes()[:4] == b"\x89PNG"
    # quiet: one line per completed batch, Spark's own output in its log file
    assert result.stderr == "" and "Stage " not in out and "Python worker" not in out
    assert "sessions: batch 0: 211 rows in" in out and "watermark end of input" in out
