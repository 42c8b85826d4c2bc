"""Nexmark (benchmarks/nexmark): the generator keeps the specification's rules, and every query run
in the local runner, micro-batch by micro-batch, gives the brute-force model's final results."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from nexmark import queries as Q  # noqa: E402
from nexmark.bundles import bundles  # noqa: E402
from nexmark.generator import (FIRST_AUCTION_ID, FIRST_PERSON_ID, NexmarkConfig, generate,  # noqa: E402
                               write_files)
from windowed_operator.engine.build import build_core

SMALL = NexmarkConfig(events=20_000, rate=2_000, max_disorder_ms=500, seed=3)
QUERY_CONFIG = Q.QueryConfig(max_disorder_ms=500, early_count=20, window_ms=1_000, period_ms=200,
                             session_gap_ms=100, processing_interval_ms=300, lateness_ms=1_000)


@pytest.fixture(scope="module")
def events():
    return generate(SMALL)


def test_proportions_ids_and_references_follow_the_specification(events):
    assert (len(events.persons), len(events.auctions), len(events.bids)) == (400, 1_200, 18_400)  # 1 : 3 : 46
    assert sorted(events.persons.id) == list(range(FIRST_PERSON_ID, FIRST_PERSON_ID + 400))
    assert sorted(events.auctions.id) == list(range(FIRST_AUCTION_ID, FIRST_AUCTION_ID + 1_200))
    # a reference points at most ID_LEAD past the newest person/auction made before it
    people_made = FIRST_PERSON_ID + events.bids.event_id // 50
    assert (events.bids.bidder <= people_made + 10).all() and (events.bids.bidder >= FIRST_PERSON_ID).all()
    auctions_made = FIRST_AUCTION_ID + (events.bids.event_id // 50) * 3 + 2
    assert (events.bids.auction <= auctions_made + 10).all()
    # hot auctions and bidders: the busiest take far more than a uniform share
    assert events.bids.auction.value_counts().iloc[0] > 20 * len(events.bids) / events.bids.auction.nunique()
    assert events.bids.bidder.value_counts().iloc[0] > 20 * len(events.bids) / events.bids.bidder.nunique()


def test_delivery_is_out_of_order_within_the_bound_and_late_events_are_behind_the_watermark():
    late = generate(NexmarkConfig(events=10_000, max_disorder_ms=300, late_fraction=0.05, late_delay_ms=1_000))
    stream = late.all()
    delay = stream.arrival - stream.dateTime
    in_bound = delay < 300
    assert in_bound.mean() == pytest.approx(0.95, abs=0.02)
    assert (delay[~in_bound] == 1_300).all()
    assert not stream.dateTime.is_monotonic_increasing and stream.arrival.is_monotonic_increasing
    # in 500-event micro-batches, an in-bound event is never behind the watermark of its batch
    watermark, late_seen = -1, 0
    for start in range(0, len(stream), 500):
        batch = stream.iloc[start:start + 500]
        behind = batch.dateTime < watermark
        assert not (behind & (batch.arrival - batch.dateTime < 300)).any()
        late_seen += int(behind.sum())
        watermark = max(watermark, batch.dateTime.max() - 300)
    assert late_seen > 0


def test_the_stream_is_deterministic():
    one, two = generate(NexmarkConfig(events=2_000, seed=9)), generate(NexmarkConfig(events=2_000, seed=9))
    assert one.all().equals(two.all())


def test_json_files_are_beams_flat_events_in_arrival_order(tmp_path, events):
    files = write_files(events, tmp_path, 5_000, fmt="json", end_marker=True)
    assert files == 6
    lines = [json.loads(line) for f in sorted(tmp_path.glob("events-*.json"))[:-2]
             for line in f.read_text().splitlines()]
    assert len(lines) == 20_000
    person = next(line for line in lines if "name" in line)
    assert set(person) == {"id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"}
    bid = next(line for line in lines if "auction" in line)
    assert set(bid) == {"auction", "bidder", "price", "dateTime", "extra"} and isinstance(bid["price"], int)
    marker = json.loads(sorted(tmp_path.glob("events-*.json"))[-2].read_text())
    assert marker["end_of_input"] is True


@pytest.mark.parametrize("count", [1, 3, 7])
def test_beams_streaming_bundles_keep_the_order_and_call_no_event_late(tmp_path, events, count):
    """Beam's streaming run is checked against the model only if no event is behind the watermark
    it lands after: the bounded-disorder rule on the arrival order the files keep."""
    write_files(events, tmp_path, 20_000, fmt="json")
    lines = (tmp_path / "events-00000.json").read_text().splitlines()
    cut = bundles(lines, count, SMALL.max_disorder_ms)
    assert len(cut) == count
    assert [line for bundle, _ in cut for line, _ in bundle] == lines
    held = [w for _, w in cut if w is not None]
    assert held == sorted(set(held)) and cut[0][1] is not None
    watermark = None
    for bundle, advanced in cut:
        if watermark is not None:
            assert min(at for _, at in bundle) >= watermark
        assert all(at == json.loads(line)["dateTime"] for line, at in bundle)
        watermark = advanced if advanced is not None else watermark
    # the last watermark is the largest event time less the bound, exactly
    assert watermark == max(at for bundle, _ in cut for _, at in bundle) - SMALL.max_disorder_ms


def test_bundles_refuse_a_count_below_one():
    with pytest.raises(ValueError, match="count must be at least 1, got 0"):
        bundles(["{}"], 0, 10)


@pytest.mark.parametrize("query", Q.QUERIES)
def test_each_query_in_the_local_runner_equals_the_model(events, query):
    stream = events.all()
    batches = [stream.iloc[i:i + 2_000] for i in range(0, len(stream), 2_000)]
    out = Q.run_local(query, QUERY_CONFIG, batches, processing_times=[i * 200 for i in range(len(batches))])
    expected = Q.model(query, events.persons, events.auctions, events.bids, QUERY_CONFIG)
    assert len(expected) > 5
    assert Q.final_result(query, Q.panes_of(out)) == expected


def test_q5_keeps_every_auction_tied_for_the_most_bids():
    import pandas as pd

    bids = pd.DataFrame({"auction": [1, 2, 2, 1, 3], "bidder": 7, "price": 1, "extra": "",
                         "dateTime": [100, 200, 300, 400, 500]})
    config = Q.QueryConfig(window_ms=1_000, period_ms=1_000)
    assert Q.model("q5", bids.iloc[:0], bids.iloc[:0], bids, config) == {(0, 1, 2), (0, 2, 2)}
    runner = Q.operator("q5", config).local_runner()
    runner.add_elements(*bids.to_dict("records"))
    runner.finish()
    assert Q.final_result("q5", Q.panes_of(runner.outputs)) == {(0, 1, 2), (0, 2, 2)}
    assert np.array_equal(sorted(v["auction"] for v in runner.outputs[-1].value), [1, 2])


def test_the_window_log_steps_benchmark_gives_q8s_model_in_both_part_forms(events):
    """``window_log_steps.py`` times the window log on q8's rows with parts by value (state version 7)
    and by column (8): both must give the model's joins."""
    from nexmark.window_log_steps import _batches, run

    core = build_core(Q.operator("q8", QUERY_CONFIG))
    batches = _batches(SMALL, 5)
    expected = Q.model("q8", events.persons, events.auctions, events.bids, QUERY_CONFIG)
    assert len(expected) > 5
    for by_column in (False, True):
        _, panes = run(core, batches, SMALL.max_disorder_ms, by_column)
        assert Q.final_result("q8", Q.panes_of(panes)) == expected
