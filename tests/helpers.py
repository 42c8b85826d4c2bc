"""Small helpers that make expected outputs readable in tests."""
from __future__ import annotations

import json
from collections import Counter

from windowed_operator.state.key_shards import DOMAIN as KEY_SHARDS_DOMAIN
from windowed_operator.panes import PaneRecord
from windowed_operator.engine.build import build_core


def fmt(record: PaneRecord) -> str:
    """``key [start,end) value TIMING #index`` plus flags: F first, L last, R retraction."""
    flags = ("F" if record.is_first else "") + ("L" if record.is_last else "") + ("R" if record.is_retraction else "")
    key = "" if record.key is None else f"{record.key} "
    text = f"{key}[{record.window_start},{record.window_end}) {record.value!r} {record.timing.value} #{record.index}"
    return f"{text} {flags}" if flags else text


def fmts(records: list[PaneRecord]) -> list[str]:
    return [fmt(r) for r in records]


def _rows(table):
    import pickle

    return pickle.dumps({k: v for k, v in vars(table).items() if k != "watermark"})


def check_next_event_time(columnar, table, watermark):
    """The timer a columnar path asks the processor for (``next_event_time``): nothing happens
    before it, something happens at it (a pane, a row purged, or a row's state changed: a firing
    whose unchanged pane is suppressed still finishes its window)."""
    import copy

    from windowed_operator.engine.columnar import Panes

    due = columnar.next_event_time(table)
    probe, out = copy.deepcopy(table), Panes()
    after = columnar.on_watermark(probe, watermark, out)
    if due is None or watermark < due:
        assert len(out) == 0 and len(after) == len(table)
    else:
        assert len(out) > 0 or len(after) < len(table) or _rows(after) != _rows(table)


def check_next_processing_time(columnar, table, watermark, now):
    """The processing-time timer a columnar path asks for (``next_processing_time``, once the
    watermark step is done): nothing fires before it, something changes at it."""
    import copy

    from windowed_operator.engine.columnar import Panes

    probe = columnar.on_watermark(copy.deepcopy(table), watermark, Panes())
    due, before, out = columnar.next_processing_time(probe), _rows(probe), Panes()
    after = columnar.on_processing_time(probe, now, out)
    if due is None or now < due:
        assert len(out) == 0 and _rows(after) == before
    else:
        assert _rows(after) != before


def near_boundaries(lo: int, hi: int, periods=(4, 5, 6, 9, 10), offsets=(0, 2), lateness=(0, 5, 7, 15, 30)):
    """Millisecond times that often sit at, just before or just after a window boundary: multiples of the
    test windows' periods (plus their offsets), shifted by an allowed lateness and then by -1, 0 or +1.
    Whole-step values alone hide off-by-one errors in the end-of-window and expiry rules."""
    from hypothesis import strategies as st

    boundary = st.builds(lambda k, p, o, late, d: k * p + o + late + d, st.integers(-2, hi // min(periods) + 1),
                         st.sampled_from(periods), st.sampled_from(offsets), st.sampled_from(lateness),
                         st.sampled_from([-1, 0, 1]))
    return st.one_of(st.integers(lo, hi), boundary.filter(lambda t: lo <= t <= hi))


class MemoryStore:
    """The Spark states of one key group, as dicts, counting every call."""

    def __init__(self) -> None:
        self.meta, self.keys, self.parts = None, {}, {}
        self.calls: Counter = Counter()

    def get_meta(self):
        self.calls["get_meta"] += 1
        return self.meta

    def put_meta(self, text):
        self.calls["put_meta"] += 1
        self.meta = text

    def get_keys(self, keys):
        self.calls["get_key"] += len(keys)
        return [self.keys.get(key) for key in keys]

    def put_keys(self, items):
        self.calls["put_key"] += len(items)
        for key, text in items:
            json.loads(text)
            self.keys[key] = text

    def remove_keys(self, keys):
        self.calls["remove_key"] += len(keys)
        for key in keys:
            del self.keys[key]

    def all_keys(self):
        self.calls["all_keys"] += 1
        return list(self.keys)

    def get_parts(self, domain, places):
        self.calls["get_parts"] += 1  # (one round trip)
        self.calls["get_part"] += len(places)
        return [list(self.parts.get((domain, bucket, part), [])) for bucket, part in places]

    def put_parts(self, domain, items):
        self.calls["put_parts"] += 1
        self.calls["put_part"] += len(items)
        for bucket, part, entries in items:
            self.parts[(domain, bucket, part)] = list(entries)

    def remove_parts(self, domain, places):
        self.calls["remove_parts"] += 1
        self.calls["remove_part"] += len(places)
        for bucket, part in places:
            del self.parts[(domain, bucket, part)]

    def get_texts(self, domain, places):
        self.calls["get_text"] += len(places)
        return [self.parts.get((domain, bucket, part)) for bucket, part in places]

    def put_texts(self, domain, items):
        self.calls["put_text"] += len(items)
        for bucket, part, text in items:
            assert isinstance(text, str) and text
            if domain != KEY_SHARDS_DOMAIN:  # (key shards are lines of JSON; the logs' texts are JSON)
                json.loads(text)
            self.parts[(domain, bucket, part)] = text

    def remove_texts(self, domain, places):
        self.calls["remove_text"] += len(places)
        for bucket, part in places:
            del self.parts[(domain, bucket, part)]


def stream_of(steps, element) -> "TestStream":
    """A TestStream of property-test steps: ``("elements", [row...])`` (each made an element by
    ``element(*row)``), ``("watermark", t)`` or ``("processing", advance)``."""
    from windowed_operator.testing import TestStream

    stream = TestStream()
    for kind, payload in steps:
        if kind == "elements":
            stream.add_elements(*[element(*row) for row in payload])
        elif kind == "watermark":
            stream.advance_watermark_to(payload)
        else:
            stream.advance_processing_time(payload)
    return stream


def pane_tuple(key, start, end, value, timing, index, is_first, is_last, is_retraction):
    """A pane as a comparable tuple (floats rounded: array sums may differ in the last bits)."""
    value = round(value, 9) if isinstance(value, float) else value
    return key, int(start), int(end), value, timing, int(index), bool(is_first), bool(is_last), bool(is_retraction)


def columnar_panes(out):
    """The panes a columnar path emitted (``columnar.Panes``), as a multiset of tuples."""
    from collections import Counter

    return Counter(pane_tuple(*row) for row in zip(out.keys, out.starts, out.ends, out.values, out.timing,
                                                   out.pane_index, out.is_first, out.is_last, out.is_retraction))


def clocked(steps):
    """Steps ``(elements, watermark[, processing-time advance])``, then the end of input, as
    ``(elements, watermark, processing_time)``: the watermark never goes back (it starts at -100);
    processing time starts at 0 and moves on by each step's advance."""
    from windowed_operator.time import MAX_TIMESTAMP

    watermark, now = -100, 0
    for step in [*steps, ([], None)]:
        elements, advance = step[0], step[1]
        now += step[2] if len(step) > 2 else 0
        watermark = MAX_TIMESTAMP if advance is None else max(watermark, advance)
        yield elements, watermark, now


def core_run(op, steps):
    """The core's panes batch by batch (and its drops by reason) on keyed steps ``[(elements, watermark
    [, processing-time advance])]`` of ``(key, ts, value)``, then the end of input: the reference the
    columnar paths are checked against."""
    from collections import Counter

    from windowed_operator.engine.key_state import KeyState

    core = build_core(op)
    states: dict = {}
    panes, dropped = [], Counter()
    for elements, watermark, now in clocked(steps):
        by_key: dict = {}
        for key, ts, value in elements:
            by_key.setdefault(key, []).append((ts, value, None))
        batch_panes = Counter()
        for key in [*by_key, *[k for k in states if k not in by_key]]:
            emission = core.process_batch(key, states.setdefault(key, KeyState()), by_key.get(key, []), watermark,
                                          now)
            dropped.update(d.reason for d in emission.dropped)
            batch_panes.update(pane_tuple(p.key, p.window_start, p.window_end, p.value, p.timing.value, p.index,
                                          p.is_first, p.is_last, p.is_retraction) for p in emission.outputs)
        panes.append(batch_panes)
    return panes, dropped


def element_arrays(elements, reads_values=True):
    """Keyed ``(key, ts, value)`` elements as the arrays a columnar path takes (values None for an
    accumulation that reads none, such as Count)."""
    import numpy as np

    keys = np.array([k for k, _, _ in elements], dtype=object)
    ts = np.array([t for _, t, _ in elements], dtype=np.int64)
    values = np.array([v for _, _, v in elements], dtype=np.int64) if reads_values else None
    return keys, ts, values


def table_engine_of(window, accumulation, trigger, lateness=0):
    """The table engine production builds for a keyed operator of these parts (``spark.plan.paths``:
    ``table_engine`` chooses, ``build_table`` builds), so that tests run the rule production runs."""
    import warnings

    from windowed_operator import KeyedWindowedOperator
    from windowed_operator.spark.plan.paths import build_table, table_engine

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a trigger that may finish before the lateness ends warns)
        op = KeyedWindowedOperator(window, accumulation, trigger=trigger, allowed_lateness=lateness)
    engine = table_engine(op)
    assert engine is not None, f"no table engine serves {op.label()}"
    return build_table(engine, op)
