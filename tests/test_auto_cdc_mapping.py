"""The Spark Declarative Pipelines AutoCDC mapping of docs/guides/table-sink.md, checked on the panes
without SDP (pyspark 4.3's AutoCDC needs a MERGE-capable table format, which this machine lacks; the
guide says why): SCD type 1 over ``keys=[key, window_start, window_end]``,
``sequence_by=struct(pane_index, NOT is_retraction)`` and ``apply_as_deletes=is_retraction`` keeps,
per window, the event with the highest sequence, and no row when that event is a delete. On random
streams of every window family (session merges included) in accumulating and retracting mode, with
the events of each bundle arriving in any order, that table equals the table sink's model."""
from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from table_sink_model import FAMILIES, TableModel, make_operator, streams, window_key
from windowed_operator.testing import TimestampedValue

import pytest


def sequence(pane) -> tuple[int, bool]:
    """``struct(pane_index, NOT is_retraction)``: structs compare field by field, false before true."""
    return (pane.index, not pane.is_retraction)


class AutoCdcScd1:
    """What an AutoCDC SCD type 1 target holds: per key the event of the highest sequence seen so far
    (an event below it, arriving late, changes nothing); a delete as that event leaves no row."""

    def __init__(self) -> None:
        self.winner: dict[tuple, object] = {}
        self.seen: dict[tuple, set] = {}

    def apply(self, events: list) -> None:
        for pane in events:
            pk = window_key(pane)
            seq = sequence(pane)
            assert seq not in self.seen.setdefault(pk, set()), f"window {pk}: two events with sequence {seq}"
            self.seen[pk].add(seq)
            if pk not in self.winner or seq > sequence(self.winner[pk]):
                self.winner[pk] = pane

    def table(self) -> dict[tuple, object]:
        return {pk: p.value for pk, p in self.winner.items() if not p.is_retraction}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("mode", ["accumulating", "retracting"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams, seed=st.integers(0, 2**16))
def test_the_auto_cdc_mapping_keeps_the_table_sinks_table(family, mode, stream, seed):
    shuffle = random.Random(seed).shuffle
    op = make_operator(family, mode, stream["early"], stream["lateness"])
    runner = op.local_runner()
    model, cdc = TableModel(mode, final_only=False), AutoCdcScd1()
    watermark = 0
    for batch_id, (kind, arg) in enumerate([*stream["steps"], ("finish", None)]):
        if kind == "add":
            panes = runner.add_elements(*[TimestampedValue((k, v), t) for k, v, t in arg])
        elif kind == "watermark":
            watermark += arg
            panes = runner.advance_watermark_to(watermark)
        else:
            panes = runner.finish()
        model.add(panes, batch_id)
        events = list(panes)
        shuffle(events)  # AutoCDC orders by the sequence, not by arrival
        cdc.apply(events)
        assert cdc.table() == {pk: row[0] for pk, row in model.expected().items()}, f"after batch {batch_id}"


def test_a_retraction_sorts_before_the_pane_that_replaces_it():
    from windowed_operator.panes import PaneRecord, Timing

    first = PaneRecord("u", 0, 10, 3, Timing.EARLY, 0, True, False, False, 9)
    retraction = PaneRecord("u", 0, 10, 3, Timing.EARLY, 1, False, False, True, 9)
    replacement = PaneRecord("u", 0, 10, 5, Timing.ON_TIME, 1, False, True, False, 9)
    cdc = AutoCdcScd1()
    cdc.apply([replacement, retraction, first])
    assert cdc.table() == {("u", 0, 10): 5}
