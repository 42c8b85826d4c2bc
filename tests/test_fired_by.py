"""``fired_by=True`` in the local runner: on random streams of every window family and accumulation
mode the panes are those of the operator without it, and each cause agrees with what Beam's rules say
of the pane (``engine.fired_by``)."""
from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings

from table_sink_model import FAMILIES, MODES, make_operator, streams
from windowed_operator.engine.fired_by import Clauses, Phase, cause, causes
from windowed_operator.testing import TimestampedValue
from windowed_operator.time import MAX_TIMESTAMP
from triggers import TriggerOption

import pytest


def run(op, steps):
    runner = op.local_runner()
    watermark, out = 0, []
    for kind, arg in [*steps, ("finish", None)]:
        if kind == "add":
            out += runner.add_elements(*[TimestampedValue((k, v), t) for k, v, t in arg])
        elif kind == "watermark":
            watermark += arg
            out += runner.advance_watermark_to(watermark)
        else:
            out += runner.finish()
    return out


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams)
def test_fired_by_changes_no_pane_and_names_what_fired_it(family, mode, stream):
    plain = make_operator(family, mode, stream["early"], stream["lateness"])
    told = plain.model_copy(update={"fired_by": True})
    panes = run(told, stream["steps"])
    assert [dataclasses.replace(p, firing=None) for p in panes] == run(plain, stream["steps"])
    for i, pane in enumerate(panes):
        firing = pane.firing
        assert firing is not None
        if firing.watermark >= MAX_TIMESTAMP:
            assert firing.fired_by == "end_of_input"
        elif pane.is_retraction:
            later = [p for p in panes[i + 1:] if p.window == pane.window and p.key == pane.key]
            assert firing.fired_by == "merge" or (later and later[0].firing.fired_by == firing.fired_by)
            if firing.fired_by == "merge":
                assert family == "sessions"
        elif pane.timing.value == "ON_TIME":
            assert firing.fired_by == "watermark" and firing.watermark >= pane.window_end
        elif firing.fired_by == "expiry":
            assert pane.is_last and firing.watermark > pane.window_end - 1 + stream["lateness"]
        else:
            assert firing.fired_by == ("early_count" if pane.timing.value == "EARLY" else "late_count")


def test_the_names_of_each_trigger_s_clauses():
    assert Clauses.of(TriggerOption.default()) == Clauses(None, "late_count")
    timed = TriggerOption.at_watermark().with_early_firings_at_every("10s").with_late_firings_at_every(count=2)
    assert Clauses.of(timed) == Clauses("early_time", "late_count")
    from triggers import AfterCount, Repeatedly

    custom = Clauses.of(TriggerOption.of(Repeatedly(AfterCount(2))))
    assert cause(Phase.ELEMENTS, "EARLY", False, 0, custom) == "element"
    assert cause(Phase.PROCESSING_TIME, "EARLY", False, 0, custom) == "processing_time"
    assert cause(Phase.WATERMARK, "EARLY", True, 0, custom) == "expiry"
    windows = [("a", 0, 10), ("a", 0, 10), ("a", 5, 20), ("b", 0, 10)]
    assert causes(windows, ["EARLY", "EARLY", "EARLY", None], [False] * 4, [True, False, True, False], Phase.ELEMENTS,
                  0, Clauses.of(timed)) == ["early_time", "early_time", "merge", None]
