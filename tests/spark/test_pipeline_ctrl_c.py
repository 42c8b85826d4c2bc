"""`windowed-operator run` stops cleanly on Ctrl-C (and on SIGTERM, a container's stop) and a second run
resumes from the checkpoint."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.spark


def write_batch(directory, index, rows):
    path = directory / f"part-{index:03d}.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))


def start(pipeline_file, log):
    return subprocess.Popen([sys.executable, "-m", "windowed_operator.cli", "run", str(pipeline_file),
                             "--master", "local[2]"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for(path, text, timeout=600):  # (a deadline against a hang only: first batches take 10-30 s when busy)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text():
            return
        time.sleep(0.5)
    raise TimeoutError(f"{text!r} not in {path.read_text()[-2000:]}")


def assert_only_the_clis_own_lines(text):
    """A stop prints the run's own lines (where Spark's log is, a line per batch, the stop's message):
    no traceback of py4j's (pyspark's SIGINT handler raising inside a JVM call), no logged error."""
    for noise in ("Traceback", "py4j", "ERROR:root", "KeyboardInterrupt"):
        assert noise not in text, text[-3000:]
    lines = [line for line in text.splitlines() if line.strip()]
    assert [line for line in lines if line.startswith("stopped; checkpoints kept under ")
            and line.endswith("(run again to resume)")], text[-3000:]
    others = [line for line in lines if not line.startswith(("Spark's log: ", "stopped; checkpoints kept under "))
              and ": batch " not in line]
    assert not others, text[-3000:]


def test_ctrl_c_and_sigterm_keep_the_checkpoint_and_a_rerun_resumes(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    base = 1_700_000_000_000
    write_batch(data, 0, [{"user": "a", "amount": 1, "ts": base}, {"user": "b", "amount": 2, "ts": base + 1_000}])
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(textwrap.dedent(f"""
        name: ctrl_c
        checkpoint: checkpoints
        trigger_interval: 1 second
        sources:
          payments: {{files: {{path: data, format: json, schema: "user string, amount bigint, ts bigint",
                              max_files_per_trigger: 1}}}}
        operators:
          - {{name: spend, input: payments, key: user, timestamp: ts, window: {{tumbling: {{size: 10s}}}},
             accumulation: {{sum: {{field: amount}}}}, watermark: {{bounded_disorder: 0s}}}}
        sinks:
          - {{input: spend, files: {{path: out, format: json}}}}
    """))
    log1 = tmp_path / "run1.log"
    with log1.open("w") as log:
        proc = start(pipeline, log)
        wait_for(log1, "batch 0: 2 rows in")
        # Ctrl-C sends SIGINT to the terminal's process group; `timeout -s INT` to the process and then
        # its group. A few in quick succession land while the first is handled (pyspark's own handler
        # is then inside a JVM call): one request to stop, not an exit at once.
        for _ in range(3):
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.02)
        assert proc.wait(timeout=300) == 130  # the shell's convention for Ctrl-C
    assert "stopped; checkpoints kept" in log1.read_text()
    assert_only_the_clis_own_lines(log1.read_text())
    commits = sorted(p.name for p in (tmp_path / "checkpoints" / "spend-0" / "commits").iterdir()
                     if not p.name.startswith("."))
    assert commits, "the first run committed batches to the checkpoint"
    # The second run reads only the new file and fires the window the first run left open.
    write_batch(data, 1, [{"user": "a", "amount": 5, "ts": base + 30_000}])
    log2 = tmp_path / "run2.log"
    with log2.open("w") as log:
        proc = start(pipeline, log)
        wait_for(log2, ": 1 rows in")
        # the batch after it closes both windows of the first run: its line comes once it has committed
        # (a fixed pause here raced a slow batch)
        wait_for(log2, " panes out (2 so far)")
        proc.send_signal(signal.SIGTERM)  # what `docker stop` sends: a clean stop too
        assert proc.wait(timeout=300) == 128 + signal.SIGTERM
    assert_only_the_clis_own_lines(log2.read_text())
    rows = [json.loads(line) for f in (tmp_path / "out").glob("*.json") for line in f.read_text().splitlines()]
    assert sorted((r["key"], r["value"]) for r in rows) == [("a", 1), ("b", 2)]
    assert "2 rows in" not in log2.read_text()  # nothing read twice


def test_run_finds_code_beside_the_file_and_exits_0_after_the_last_panes_of_a_processing_time_pipeline(tmp_path):
    """A user accumulation in a module beside the pipeline file (no PYTHONPATH, no --py-files), early
    panes by processing time: ``run`` stops once the input has ended and its last panes are written."""
    (tmp_path / "my_sums.py").write_text(textwrap.dedent("""
        from accumulations import Sum

        class DoubleSum(Sum):
            def get_output(self, accumulated):
                return 2 * accumulated
    """))
    data = tmp_path / "data"
    data.mkdir()
    base = 1_700_000_000_000
    write_batch(data, 0, [{"user": "a", "amount": 1, "ts": base}, {"user": "b", "amount": 2, "ts": base + 1_000}])
    write_batch(data, 1, [{"user": "a", "amount": 3, "ts": base + 2_000}])
    write_batch(data, 2, [{"end_of_input": True, "ts": 9_000_000_000_000}])
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(textwrap.dedent("""
        name: beside
        checkpoint: checkpoints
        trigger_interval: 300ms
        sources:
          payments: {files: {path: data, format: json, max_files_per_trigger: 1, end_of_input: end_of_input,
                             schema: "user string, amount bigint, ts bigint, end_of_input boolean"}}
        operators:
          - {name: spend, input: payments, key: user, timestamp: ts, window: {tumbling: {size: 10s}},
             trigger: {kind: at_watermark, early: {duration: 1s}, mode: accumulating},
             accumulation: {code: {path: "my_sums:DoubleSum", args: {field: amount}}},
             watermark: {bounded_disorder: 0s}}
        sinks:
          - {input: spend, files: {path: out, format: json}}
    """))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-m", "windowed_operator.cli", "run", str(pipeline), "--master", "local[2]",
                             "--allow-module", "my_sums"], capture_output=True, text=True, timeout=600, env=env,
                            cwd=str(data))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for f in (tmp_path / "out").glob("*.json") for line in f.read_text().splitlines()]
    finals = sorted((r["key"], r["value"]) for r in rows if r["is_last"])
    assert finals == [("a", 8), ("b", 4)]
    assert "watermark end of input" in result.stdout


def test_a_stop_signal_is_a_request_and_a_later_second_one_exits_at_once():
    """No JVM: the handler records the first signal (a quick repeat is the same request), puts the
    previous handlers back, and exits at once with 128 + the signal on a second one a second later."""
    from windowed_operator.spark.pipeline_run import StopSignals, Stopped

    before = signal.getsignal(signal.SIGINT)
    with StopSignals() as signals:
        # the second signal lands within the window whatever the machine's load (a stall of over a
        # second between the two here would otherwise make it an exit: of the test process)
        signals.REPEAT_WITHIN = 600.0
        assert not signals.requested()
        signals.check()  # nothing asked yet
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # within REPEAT_WITHIN: not an exit
        time.sleep(0.05)
        assert signals.received == signal.SIGINT
        with pytest.raises(Stopped) as stopped:
            signals.check()
        assert isinstance(stopped.value, KeyboardInterrupt) and stopped.value.signum == signal.SIGINT
    assert signal.getsignal(signal.SIGINT) is before
    script = textwrap.dedent("""
        import os, signal, time
        from windowed_operator.spark.pipeline_run import StopSignals
        with StopSignals() as signals:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(StopSignals.REPEAT_WITHIN + 0.2)
            print("asked:", signals.received, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        print("not reached")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 128 + signal.SIGTERM, result.stdout + result.stderr
    assert result.stdout == f"asked: {int(signal.SIGTERM)}\n"
    assert result.stderr.startswith("stopped at once; checkpoints keep every committed micro-batch"), result.stderr
