"""The operators whose stored descriptions are frozen (``tests/test_frozen_state.py``).

A checkpoint stores, in each key group's record, the fingerprint of the operator that wrote it
(``windowed_operator.state.fingerprint.state_fingerprint``): the ``repr`` of its window, accumulation and
watermark, its trigger's description, and the other parts as text.  A restart compares them with
the running operator's, so a description that changes (a reordered field, a renamed class, another
default shown) makes every checkpoint of that operator refuse to restart.  These cases cover every
window family, trigger form, accumulation and watermark of the public API.

    python tests/frozen_cases.py   # rewrites tests/fixtures/frozen/fingerprints.json (a deliberate change)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "frozen" / "fingerprints.json"
#: The layout and execution parts are given (they are chosen on Spark; the stored fixtures freeze them).
EXECUTION = dict(key_groups=64, layout="per-key windows", time_mode="EventTime", state_version=8,
                 key_column="user")


def cases() -> dict[str, Any]:
    from accumulations import (AllMax, ApproxCountDistinct, ApproxPercentile, Cogroup, Count, CountDistinct,
                               FullOuterJoin, InnerJoin, LeftOuterJoin, Max, Mean, Min, Quantiles, Reduce, Sum,
                               ToList, TopN)
    from triggers import (AfterAll, AfterAny, AfterCount, AfterEach, AfterProcessingTime, AfterWatermark, OrFinally,
                          Repeatedly, TriggerOption)
    from windowed_operator import (CumulativeWindows, GlobalWindow, KeyedWindowedMergeOperator,
                                   KeyedWindowedOperator, SessionWindows, SlidingWindows, TimeWindows,
                                   TimestampCombiner, WindowedMergeOperator, WindowedOperator, bounded_disorder,
                                   fixed_watermark, upstream_watermark)

    tumbling = TimeWindows(10_000)
    windows = {
        "global": GlobalWindow(), "tumbling": tumbling, "tumbling_offset": TimeWindows(10_000, offset=3_000),
        "hopping": TimeWindows(10_000).slide_by(5_000), "sessions": SessionWindows(3_000),
        "sessions_gap_column": SessionWindows(gap="gap_ms"), "sliding": SlidingWindows(5_000),
        "cumulative": CumulativeWindows(60_000, 10_000),
    }
    accumulations = {
        "sum": Sum(), "sum_field": Sum("amount"), "count": Count(), "min": Min("amount"), "max": Max("amount"),
        "mean": Mean("amount"), "top_n": TopN(3, field="amount"), "all_max": AllMax(field="amount"), "to_list": ToList("amount"),
        "reduce": Reduce(max, result_type="bigint"), "count_distinct": CountDistinct("amount"),
        "approx_count_distinct": ApproxCountDistinct("amount"), "quantiles": Quantiles("amount"),
        "approx_percentile": ApproxPercentile("amount", 0.9),
    }
    triggers = {
        "default": TriggerOption.default(),
        "at_watermark": TriggerOption.at_watermark(),
        "early_count_late_count_retracting": TriggerOption.at_watermark().with_early_firings_at_every(count=2)
        .with_late_firings_at_every(count=1).accumulating_and_retracting_fired_panes(),
        "early_time_discarding": TriggerOption.at_watermark().with_early_firings_at_every(5_000)
        .discarding_fired_panes(),
        "only_updated": TriggerOption.at_watermark().with_late_firings_at_every(count=1).fire_only_updated_panes(),
        "repeatedly_count": TriggerOption.of(Repeatedly(AfterCount(2))).discarding_fired_panes(),
        "composite": TriggerOption.of(Repeatedly(AfterAny(AfterCount(3), AfterProcessingTime(1_000)))),
        "after_each": TriggerOption.of(AfterEach(AfterCount(1), AfterWatermark())),
        "after_all_or_finally": TriggerOption.of(OrFinally(Repeatedly(AfterAll(AfterCount(2), AfterCount(1))),
                                                           AfterWatermark())),
    }
    watermarks = {"upstream": upstream_watermark(), "fixed": fixed_watermark(5_000),
                  "bounded_disorder": bounded_disorder(2_000),
                  "bounded_disorder_idle": bounded_disorder(2_000, idle_timeout=10_000)}
    ops: dict[str, Any] = {}
    for name, window in windows.items():
        ops[f"window:{name}"] = KeyedWindowedOperator(window, Sum("amount"), key="user", timestamp="ts")
    for name, acc in accumulations.items():
        ops[f"accumulation:{name}"] = KeyedWindowedOperator(tumbling, acc, key="user", timestamp="ts")
    for name, trigger in triggers.items():
        ops[f"trigger:{name}"] = KeyedWindowedOperator(tumbling, Sum("amount"), key="user", timestamp="ts",
                                                       trigger=trigger, allowed_lateness=5_000)
    for name, watermark in watermarks.items():
        ops[f"watermark:{name}"] = KeyedWindowedOperator(tumbling, Sum("amount"), key="user", timestamp="ts",
                                                         watermark=watermark)
    ops["options:non_keyed"] = WindowedOperator(tumbling, Count(), timestamp="ts")
    ops["options:combiner_earliest"] = KeyedWindowedOperator(
        tumbling, Sum("amount"), key="user", timestamp="ts", timestamp_combiner=TimestampCombiner.EARLIEST)
    ops["options:outputs"] = KeyedWindowedOperator(tumbling, Sum("amount"), key="user", timestamp="ts",
                                                   late_data_output=True, on_bad_element="dead_letter")
    ops["options:record_value"] = KeyedWindowedOperator(tumbling, Sum(), key="user", timestamp="ts",
                                                        value={"amount": "amount"})
    for name, acc in {"inner_join": InnerJoin(), "left_outer_join": LeftOuterJoin(),
                      "full_outer_join": FullOuterJoin(), "cogroup": Cogroup()}.items():
        ops[f"merge:{name}"] = KeyedWindowedMergeOperator(tumbling, acc, key="user", timestamp="ts")
    ops["merge:non_keyed"] = WindowedMergeOperator(tumbling, InnerJoin(), timestamp="ts")
    return ops


def described() -> dict[str, dict[str, str]]:
    from windowed_operator.state.fingerprint import state_fingerprint

    return {name: state_fingerprint(op, **EXECUTION) for name, op in cases().items()}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    GOLDEN.write_text(json.dumps(described(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
