"""``windowed-operator verify-restarts``: the sessions-table example survives 3 SIGKILLs of its driver
with its table equal to an uninterrupted run's, and a sink that applies a replayed batch again is
caught (a test that shows the command can fail)."""
from __future__ import annotations

import shutil
import textwrap

import pytest

from windowed_operator import cli
from windowed_operator.pipeline import load_pipeline
from windowed_operator.spark.verify import refusals

from .test_cluster import REPO, load_example

pytestmark = pytest.mark.spark


def test_the_sessions_table_example_survives_three_kills(tmp_path, capsys):
    root = tmp_path / "pipelines"
    root.mkdir()
    shutil.copy(REPO / "examples" / "pipelines" / "sessions_table.yaml", root)
    load_example(REPO / "examples" / "pipelines" / "run.py", "pipeline_examples").generate("sessions_table", 2_000, root=root)
    code = cli.main(["verify-restarts", str(root / "sessions_table.yaml"), "--kills", "3", "--seed", "1",
                     "--workdir", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "3 kill(s) landed" in out and "sinks[0] (sessions -> table sessions): equal (" in out
    assert out.rstrip().endswith("verdict: the outputs are equal")


#: Makes the table sink non-idempotent in the starts of a verify-restarts run (not in Spark's Python
#: workers, which do not run the sink): each call applies its batch whatever the progress row says,
#: so a batch Spark replays after a kill is applied again; in the run with kills it then lingers, so
#: that a kill lands between its write and Spark's commit of the batch.
NON_IDEMPOTENT = '''
import sys, time
if "--child" in sys.argv:
    from windowed_operator.sinks import table
    _apply = table.TableSink._apply
    def forgetful(self, deletes, upserts, batch_id, query, result):
        _apply(self, deletes, upserts, batch_id, f"{query}-{time.monotonic_ns()}", result)
        if any("killed" in arg for arg in sys.argv):
            time.sleep(2)
    table.TableSink._apply = forgetful
'''


def test_a_sink_that_applies_a_replayed_batch_again_is_caught(tmp_path, capsys, monkeypatch):
    rows = ", ".join(f"{{user: u{i % 3}, ts: {i * 1_000}}}" for i in range(40))
    path = tmp_path / "counts.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: counts
        sources:
          clicks: {{memory: {{schema: "user string, ts bigint", rows_per_batch: 4, rows: [{rows}]}}}}
        operators:
          - {{name: counts, input: clicks, key: user, timestamp: ts, window: {{tumbling: {{size: 10s}}}},
             trigger: {{kind: at_watermark, early: {{count: 1}}, mode: discarding}}, accumulation: {{count: {{}}}}}}
        sinks:
          - {{input: counts, table: {{url: "sqlite:///counts.db", table: counts, mode: add}}}}
        """))
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(NON_IDEMPOTENT)
    monkeypatch.setenv("PYTHONPATH", f"{hook}:{__import__('os').environ.get('PYTHONPATH', '')}")
    code = cli.main(["verify-restarts", str(path), "--kills", "3", "--seed", "36", "--workdir", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "sinks[0] (counts -> table counts): DIFFERENT:" in out and "with kills only:" in out
    assert out.rstrip().endswith("not deterministic)")


def test_outputs_that_cannot_be_compared_are_refused_saying_why(tmp_path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent("""\
        trigger_interval: 5s
        sources: {clicks: {rate: {}}}
        operators:
          - {name: counts, input: clicks, timestamp: timestamp, window: {tumbling: {size: 10s}}, accumulation: {count: {}}}
        sinks:
          - {input: counts, console: {}}
          - {input: counts, table: {url: "postgresql://db:5432/x", table: counts, mode: add}}
        """))
    assert [why.split(":")[0] for why in refusals(load_pipeline(path))] == [
        "trigger_interval", "sources.clicks", "sinks[0] (input 'counts')", "sinks[1] (input 'counts')"]
    assert cli.main(["verify-restarts", str(path)]) == 2
    err = capsys.readouterr().err
    assert "verify-restarts cannot compare its runs" in err and "a console sink's output cannot be read back" in err
    assert "the table is in a database server" in err
