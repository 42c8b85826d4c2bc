"""What a restart may change (issue 56): every change of the operator between two runs of one
checkpoint is either refused with a message naming it, or gives the panes of an uninterrupted run
with the new operator from the restart on (before it the old operator's, which were emitted).

One checkpoint per base operator is written once over the first batches (late rows included); each
cell restarts a copy of it with a changed operator over the rest.  The source directory is shared,
so every copy's file log names the same files read."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Optional

import pytest
from pyspark.errors import StreamingQueryException

from accumulations import Mean, Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, bounded_disorder
from windowed_operator.state.fingerprint import ADVICE, SAFE_CHANGES
from windowed_operator.spark import END_OF_INPUT
from windowed_operator.time import MIN_TIMESTAMP

from .harness import (BASE, END_COLUMN, END_MARKER, MARKED_SCHEMA, _local_runner, is_marker, local_panes, pane_tuple,
                      write_batches)

pytestmark = pytest.mark.spark

DELAY = 2_000


def rows(*items):
    return [{"user": user, "amount": amount, "ts": BASE + at} for user, amount, at in items]


BATCHES = [
    rows(("a", 1, 1_000), ("b", 2, 1_500), ("a", 3, 4_000), ("c", 1, 9_000)),
    rows(("a", 4, 12_000), ("b", 5, 14_000), ("a", 2, 8_000), ("a", 1, 3_000)),  # a's [0, 10 s): an early pane
    rows(("c", 6, 22_000), ("a", 7, 9_500), ("b", 0, 5_000)),  # late within 5 s of lateness, not within 1 s
    # the restart: [0, 10 s) expired under 5 s of lateness (not under 30 s); late rows in [10, 20 s)
    rows(("a", 8, 2_000), ("b", 1, 16_000), ("c", 2, 23_000), ("a", 0, 13_000)),
    rows(("a", 1, 42_000), ("b", 3, 18_000), ("a", 2, 7_000)),  # b at 35 s next: late under 2 s of delay, not 4 s
    rows(("c", 1, 60_000), ("b", 1, 35_000), ("c", 1, 44_000)),
]
SPLIT = 3  # batches before the restart


def trigger(mode: str) -> TriggerOption:
    option = TriggerOption.at_watermark().with_early_firings_at_every(count=3).with_late_firings_at_every(count=1)
    return {"accumulating": option.accumulating_fired_panes(), "discarding": option.discarding_fired_panes(),
            "retracting": option.accumulating_and_retracting_fired_panes()}[mode]


def operator(mode: str = "accumulating", **kw) -> KeyedWindowedOperator:
    options: dict[str, Any] = dict(key="user", timestamp="ts", watermark=bounded_disorder(DELAY),
                                   allowed_lateness=5_000, trigger=trigger(mode))
    options.update(kw)
    window = options.pop("window", TimeWindows(10_000))
    accumulation = options.pop("accumulation", Sum("amount"))
    return KeyedWindowedOperator(window, accumulation, **options)


# -- the uninterrupted run -------------------------------------------------------------------------
def local_outputs(op, delays: tuple[int, int]) -> tuple[list, int]:
    """The local runner over every batch under the watermarks Spark computes (each batch's largest
    event time less the delay, ``delays[1]`` from the restart on, never moving back); with the
    number of outputs before the restart's first batch (the first run's last, no-data batch applies
    the watermark the restart's first batch sees)."""
    runner = _local_runner(op, 0)
    watermark, cut = MIN_TIMESTAMP, 0
    for i, batch in enumerate([*BATCHES, [END_MARKER]]):
        if watermark > MIN_TIMESTAMP:
            runner.advance_watermark_to(watermark)
        if i == SPLIT:
            cut = len(runner.outputs)
        real = [r for r in batch if not is_marker(r)]
        if real:
            runner.add_elements(*real)
        stamps = [r["ts"] for r in real if r["ts"] < END_OF_INPUT]
        delay = delays[1] if i >= SPLIT else delays[0]
        if stamps and max(stamps) - delay > 0:
            watermark = max(watermark, max(stamps) - delay)
    runner.finish()
    return runner.outputs, cut


class _Outputs:
    def __init__(self, outputs: list) -> None:
        self.outputs = outputs


def expected_panes(old, new, delays: tuple[int, int] = (DELAY, DELAY)) -> Counter:
    """The old operator's panes before the restart, the new one's (run uninterrupted) after it."""
    before, cut = local_outputs(old, delays)
    after, cut_new = local_outputs(new, delays)
    return local_panes(_Outputs(before[:cut] + after[cut_new:]))


# -- Spark -----------------------------------------------------------------------------------------
def _sink(directory: Path):
    directory.mkdir(parents=True, exist_ok=True)

    def write(batch_df, batch_id):
        found = batch_df.selectExpr("*", "unix_millis(window_start) as ws", "unix_millis(window_end) as we",
                                    "unix_millis(timestamp) as ts_ms").drop("window_start", "window_end",
                                                                           "timestamp").collect()
        (directory / f"batch-{batch_id:05d}.json").write_text(
            "".join(json.dumps(r.asDict(), default=str) + "\n" for r in found))
    return write


def _read(directory: Path) -> tuple[Counter, list[dict]]:
    found = [json.loads(line) for path in sorted(directory.glob("batch-*.json"))
             for line in path.read_text().splitlines()]
    panes = Counter(pane_tuple(r) for r in found if r.get("record_type", "pane") == "pane")
    return panes, [r for r in found if r.get("record_type", "pane") != "pane"]


def _run(spark, op, source: Path, run_dir: Path, options: Optional[dict] = None, conf: Optional[dict] = None):
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    before = {name: spark.conf.get(name, None) for name in conf or {}}
    for name, value in (conf or {}).items():
        spark.conf.set(name, value)
    try:
        out = op.apply(df, end_of_input=END_COLUMN, **(options or {}))
        query = (out.writeStream.foreachBatch(_sink(run_dir / "out")).option("checkpointLocation",
                                                                            str(run_dir / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    finally:
        for name, value in before.items():  # (the session's own value: unset would give Spark's default)
            if value is None:
                spark.conf.unset(name)
            else:
                spark.conf.set(name, value)


BASES = ("accumulating", "retracting", "discarding")


@pytest.fixture(scope="module")
def checkpoints(spark, tmp_path_factory):
    """Each base operator's checkpoint after the first ``SPLIT`` batches; then the rest of the input
    is in the shared source directory."""
    root = tmp_path_factory.mktemp("restart-matrix")
    staging, source = root / "staging", root / "source"
    files = write_batches(staging, BATCHES)
    source.mkdir()
    for i in range(SPLIT):
        (staging / f"batch-{i:05d}.json").replace(source / f"batch-{i:05d}.json")
    for mode in BASES:
        _run(spark, operator(mode), source, root / mode)
    for i in range(SPLIT, len(files)):
        (staging / f"batch-{i:05d}.json").replace(source / f"batch-{i:05d}.json")
    return root


def restart(spark, checkpoints: Path, base: str, op, tmp_path: Path, **kw) -> tuple[Counter, list[dict]]:
    run_dir = tmp_path / "run"
    shutil.copytree(checkpoints / base, run_dir)
    _run(spark, op, checkpoints / "source", run_dir, **kw)
    return _read(run_dir / "out")


REFUSED = {
    "window size": ("accumulating", operator(window=TimeWindows(20_000)), {}, "window changed from TimeWindows"),
    "slide": ("accumulating", operator(window=TimeWindows(10_000).slide_by(5_000)), {}, "window changed from"),
    "kind": ("accumulating", operator(window=SessionWindows(10_000)), {}, "window changed from TimeWindows"),
    "key groups": ("accumulating", operator(), {"key_groups": 3}, "key groups changed from 16 to 3"),
    "accumulation": ("accumulating", operator(accumulation=Mean("amount")), {},
                     "accumulation changed from Sum(field='amount') to Mean"),
    "value column": ("accumulating", operator(accumulation=Sum("ts")), {}, "value column changed from amount to ts"),
    "trigger": ("accumulating", operator(trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=2)
                                         .accumulating_fired_panes()), {}, "trigger changed from"),
    "lateness up": ("accumulating", operator(allowed_lateness=30_000), {},
                    "allowed lateness changed from 5000 to 30000: windows the old lateness expired"),
    "accumulating -> discarding": ("accumulating", operator("discarding"), {},
                                   "accumulation mode changed from accumulating to discarding"),
    "retracting -> discarding": ("retracting", operator("discarding"), {},
                                 "accumulation mode changed from accumulating_and_retracting to discarding"),
    "discarding -> accumulating": ("discarding", operator("accumulating"), {},
                                   "accumulation mode changed from discarding to accumulating"),
    "discarding -> retracting": ("discarding", operator("retracting"), {},
                                 "accumulation mode changed from discarding to accumulating_and_retracting"),
}


@pytest.mark.parametrize("cell", list(REFUSED))
def test_a_restart_the_state_cannot_follow_is_refused_naming_the_change(spark, checkpoints, tmp_path, cell):
    base, op, options, named = REFUSED[cell]
    with pytest.raises(StreamingQueryException) as caught:
        restart(spark, checkpoints, base, op, tmp_path, options=options)
    assert named in str(caught.value)


EXACT = {
    "shuffle partitions": ("accumulating", operator(), {"conf": {"spark.sql.shuffle.partitions": "5"}}),
    "accumulating -> retracting": ("accumulating", operator("retracting"), {}),
    "retracting -> accumulating": ("retracting", operator("accumulating"), {}),
    "lateness down": ("accumulating", operator(allowed_lateness=1_000), {}),
    "only updated panes": ("accumulating", operator(trigger=trigger("accumulating").fire_only_updated_panes()), {}),
    "outputs": ("accumulating", operator(late_data_output=True, on_bad_element="dead_letter", name="renamed"), {}),
}


@pytest.mark.parametrize("cell", list(EXACT))
def test_a_restart_the_state_can_follow_equals_an_uninterrupted_run(spark, checkpoints, tmp_path, cell):
    base, op, kw = EXACT[cell]
    panes, side = restart(spark, checkpoints, base, op, tmp_path, **kw)
    assert panes == expected_panes(operator(base), op)
    if cell == "outputs":  # the rows the new output keeps: each expired row after the restart
        assert sorted(json.loads(r["element"])["ts"] - BASE for r in side) == [2_000, 7_000]


def test_a_restart_with_another_watermark_delay_follows_the_watermarks_it_computes(spark, checkpoints, tmp_path):
    """The watermark policy holds no state: the panes are an uninterrupted run's under the watermarks
    the restarted query computes (the stored one, then the new delay's, never moving back)."""
    op = operator(watermark=bounded_disorder(4_000))
    panes, _ = restart(spark, checkpoints, "accumulating", op, tmp_path)
    assert panes == expected_panes(operator(), op, delays=(DELAY, 4_000))
    assert panes != expected_panes(operator(), op), "the new delay changed when panes fired"


def test_the_matrix_covers_every_change_the_rules_name():
    """Each part a restart may change is a cell here, each direction it refuses too (``fingerprint``)."""
    covered = {"allowed lateness": {"lateness up", "lateness down"},
               "accumulation mode": {c for c in [*REFUSED, *EXACT] if "->" in c},
               "only updated panes": {"only updated panes"}, "watermark": {"watermark"}, "outputs": {"outputs"}}
    assert set(covered) == set(SAFE_CHANGES)
    assert {"window", "accumulation", "value column", "trigger", "key groups"} <= set(ADVICE)


# -- the cases of issue 56, as reported ------------------------------------------------------------
def _restart_with(spark, tmp_path: Path, first, second, batches: list[list[dict]], split: int) -> None:
    staging, source = tmp_path / "staging", tmp_path / "source"
    files = write_batches(staging, batches)
    source.mkdir()
    for i in range(len(files)):
        if i == split:
            _run(spark, first, source, tmp_path / "run")
        (staging / f"batch-{i:05d}.json").replace(source / f"batch-{i:05d}.json")
    _run(spark, second, source, tmp_path / "run")


def test_raising_allowed_lateness_after_a_window_expired_is_refused(spark, tmp_path):
    """[0, 10 s) fired and expired under no lateness; under 30 s a late row would re-open it as a new
    window (LATE 5, pane 0: an uninterrupted run at 30 s says LATE 6, pane 1)."""
    first = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts",
                                  trigger=TriggerOption.default().accumulating_fired_panes(), allowed_lateness=0,
                                  watermark=bounded_disorder(DELAY))
    second = first.model_copy(update={"allowed_lateness": 30_000})
    with pytest.raises(StreamingQueryException, match="allowed lateness changed from 0 to 30000"):
        _restart_with(spark, tmp_path, first, second, [rows(("a", 1, 1_000)), rows(("b", 1, 25_000)),
                                                       rows(("a", 5, 3_000))], split=2)


def test_switching_accumulating_to_discarding_after_an_early_pane_is_refused(spark, tmp_path):
    """EARLY 39 fired accumulating; discarding from there would emit 47 for the 8 that came since."""
    early = TriggerOption.at_watermark().with_early_firings_at_every(count=3)
    first = KeyedWindowedOperator(TimeWindows(10_000), Sum("amount"), key="user", timestamp="ts",
                                  trigger=early.accumulating_fired_panes(), watermark=bounded_disorder(DELAY))
    second = first.model_copy(update={"trigger": early.discarding_fired_panes()})
    with pytest.raises(StreamingQueryException, match="accumulation mode changed from accumulating to discarding"):
        _restart_with(spark, tmp_path, first, second, [rows(("a", 10, 1_000), ("a", 10, 2_000), ("a", 19, 3_000)),
                                                       rows(("a", 3, 4_000), ("a", 3, 5_000), ("a", 2, 6_000))],
                      split=1)
