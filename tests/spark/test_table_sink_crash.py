"""A Spark query writing into SQLite or DuckDB through the table sink, SIGKILLed (its process group and every
process it started) at random points and restarted from its checkpoint, leaves the tables an
uninterrupted run leaves, and no batch is applied twice (benchmarks/table_sink_crash.py; this is
its short form: one kill, one query (each kill costs a driver's start, about a minute of CI); the full one, 10 kills over 2 runs of two queries, compares
with uninterrupted Spark runs, and its last output is in benchmarks/results/table_sink_crash.txt)."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from windowed_operator.sinks import TableSink

from .harness import run_local_like_spark

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import table_sink_crash as crash  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("database", sorted(crash.DATABASES))
def test_kills_at_random_points_leave_the_uninterrupted_table(tmp_path, database):
    """The discarding counts (mode add: a batch applied twice would count twice), four batches."""
    if database == "duckdb":
        pytest.importorskip("duckdb_engine", reason='no DuckDB driver: pip install -e ".[duckdb]"')
    batches = crash.make_batches(seed=11, n_batches=4)
    outcome = crash.run_with_kills(tmp_path / "killed", batches, kills=1, rng=random.Random(5), say=lambda _: None,
                                   tables=("counts",), database=database)
    assert outcome["kills"] == 1, outcome["moments"]
    # the uninterrupted run's table: the local runner's over the same batches (which a Spark run
    # gives: tests/spark/test_table_sink_spark.py)
    reference = {}
    for name in ("counts",):
        op = crash.OPERATORS[name]()
        local = TableSink(str(tmp_path / "local.db"), name, mode=crash.MODES[name], operator=op,
                          columns=["timing", "pane_index", "batch_id"])
        local(run_local_like_spark(op, batches, crash.DELAY).outputs, 0)
        reference[name] = crash.table_rows(tmp_path / "local.db", name)
        assert len(reference[name]) > 5
    # every element counted once: no value depends on where micro-batches end, which a restart may
    # move (crash.LATENESS)
    assert sum(row[3] for row in reference["counts"]) == sum(map(len, batches))
    crash.check(tmp_path / "killed", reference, outcome, database)
