"""Bad configuration raises a pydantic error naming the field; bad elements raise or go to dead letters."""
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from accumulations import Count, CountDistinct, Max, Mean, Min, Reduce, Sum, ToList
from triggers import AfterCount, AfterProcessingTime, TriggerOption
from windowed_operator import BadElementError, DropReason, KeyedWindowedOperator, TimeWindows, WindowedOperator
from windowed_operator.elements import element_json
from windowed_operator.testing import TestStream, TimestampedValue
from windowed_operator.time import END_OF_INPUT


@pytest.mark.parametrize("make,field", [
    (lambda: TriggerOption.at_watermark().with_early_firings_at_every(count=0), "count"),
    (lambda: TriggerOption.at_watermark().with_late_firings_at_every(duration=-5), "duration"),
    (lambda: TriggerOption(mode="sometimes"), "mode"),
    (lambda: AfterCount(0), "count"),
    (lambda: AfterProcessingTime(-1), "delay"),
    (lambda: KeyedWindowedOperator(TimeWindows(10), Sum(), allowed_lateness=-1), "allowed_lateness"),
    (lambda: KeyedWindowedOperator(TimeWindows(10), Sum(), on_bad_element="ignore"), "on_bad_element"),
    (lambda: KeyedWindowedOperator(TimeWindows(10), Sum(), watermark={"kind": "fixed_lag", "lag": -3}),
     "watermark"),
])
def test_bad_configuration_names_the_field(make, field):
    with pytest.raises(ValidationError) as info:
        make()
    assert field in info.value.errors()[0]["loc"]


def test_a_misspelled_option_names_itself():
    """Operators have named parameters (type checkers and IDEs see them): Python refuses an unknown
    keyword; the other option classes refuse it as a pydantic error on the field."""
    with pytest.raises(TypeError, match="unexpected keyword argument 'windw'"):
        KeyedWindowedOperator(TimeWindows(10), Sum(), windw=TimeWindows(5))
    with pytest.raises(ValidationError) as info:
        TimeWindows(10, sise=5)
    assert "sise" in info.value.errors()[0]["loc"]


def test_firing_needs_exactly_one_of_duration_and_count():
    with pytest.raises(ValidationError, match="exactly one"):
        TriggerOption.at_watermark().with_early_firings_at_every()


def test_timestamps_can_be_fields_callables_datetimes_and_iso_strings():
    op = KeyedWindowedOperator(TimeWindows(10_000), Sum("n"), key="user", timestamp="at")
    runner = op.local_runner()
    runner.add_elements({"user": "a", "n": 1, "at": 1_000},
                        {"user": "a", "n": 2, "at": datetime(1970, 1, 1, 0, 0, 2, tzinfo=timezone.utc)},
                        {"user": "a", "n": 4, "at": "1970-01-01T00:00:03Z"})
    [pane] = runner.finish()
    assert pane.value == 7 and (pane.window_start, pane.window_end) == (0, 10_000)
    op2 = KeyedWindowedOperator(TimeWindows(10), Sum(), key=lambda e: e[0], value=lambda e: e[1],
                                timestamp=lambda e: e[2])
    runner2 = op2.local_runner()
    runner2.add_elements(("a", 5, 3), ("a", 6, 12))
    assert [(p.key, p.window_start, p.value) for p in runner2.finish()] == [("a", 0, 5), ("a", 10, 6)]


@pytest.mark.parametrize("element,reason", [
    ({"user": "a", "n": 1}, DropReason.MISSING_TIMESTAMP),
    ({"user": "a", "n": 1, "at": "yesterday-ish"}, DropReason.INVALID_TIMESTAMP),
    ({"user": "a", "n": 1, "at": None}, DropReason.MISSING_TIMESTAMP),
    ({"n": 1, "at": 5}, DropReason.MISSING_KEY),
    ({"user": None, "n": 1, "at": 5}, DropReason.MISSING_KEY),
    ({"user": float("nan"), "n": 1, "at": 5}, DropReason.MISSING_KEY),
    ({"user": ["unhashable"], "n": 1, "at": 5}, DropReason.INVALID_KEY),
    ({"user": "a", "at": 5}, DropReason.INVALID_VALUE),
    ({"user": "a", "n": None, "at": 5}, DropReason.INVALID_VALUE),
    ({"user": "a", "n": float("nan"), "at": 5}, DropReason.INVALID_VALUE),
    ({"user": "a", "n": 1, "at": END_OF_INPUT}, DropReason.INVALID_TIMESTAMP),
    ({"user": "a", "n": 1, "at": "2300-01-01T00:00:00Z"}, DropReason.INVALID_TIMESTAMP),
])
def test_bad_elements_raise_by_default_and_leave_no_trace(element, reason):
    op = KeyedWindowedOperator(TimeWindows(10), Sum("n"), key="user", timestamp="at")
    runner = op.local_runner()
    with pytest.raises(BadElementError) as info:
        runner.add_elements({"user": "a", "n": 1, "at": 1}, element)
    assert info.value.reason == reason
    assert runner.states == {}  # the good element of the bundle was not half-applied


@pytest.mark.parametrize("element,reason", [
    ({"user": "a", "n": 1}, DropReason.MISSING_TIMESTAMP),
    ({"user": "a", "n": 1, "at": "not a time"}, DropReason.INVALID_TIMESTAMP),
    ({"n": 1, "at": 5}, DropReason.MISSING_KEY),
    ({"user": "a", "n": 1, "at": END_OF_INPUT + 1}, DropReason.INVALID_TIMESTAMP),
])
def test_bad_elements_go_to_dead_letters_with_their_reason(element, reason):
    op = KeyedWindowedOperator(TimeWindows(10), Sum("n"), key="user", timestamp="at", on_bad_element="dead_letter")
    runner = op.local_runner()
    runner.add_elements({"user": "a", "n": 1, "at": 1}, element)
    assert [(d.reason, d.element) for d in runner.dead_letters] == [(reason, element)]
    assert runner.dropped_counts == {reason.value: 1}
    assert [p.value for p in runner.finish()] == [1]


def test_a_null_key_or_value_is_a_dead_letter_and_the_rest_still_sums():
    op = KeyedWindowedOperator(TimeWindows(10), Sum(), value="n", on_bad_element="dead_letter")
    runner = op.local_runner()
    runner.add_elements(TimestampedValue(("a", {"n": 5}), 1), TimestampedValue(("a", {"n": None}), 2),
                        TimestampedValue((None, {"n": 3}), 3), TimestampedValue(("a", {"n": 7}), 4))
    assert [d.reason for d in runner.dead_letters] == [DropReason.INVALID_VALUE, DropReason.MISSING_KEY]
    assert [(p.key, p.value) for p in runner.finish()] == [("a", 12)]


def test_keyed_operator_without_key_extractor_needs_pairs():
    runner = KeyedWindowedOperator(TimeWindows(10), Sum()).local_runner()
    with pytest.raises(BadElementError, match="missing_key"):
        runner.add_elements(TimestampedValue(5, 1))


def test_unparseable_timestamped_value_is_a_bad_element():
    runner = WindowedOperator(TimeWindows(10), Sum(), on_bad_element="dead_letter").local_runner()
    runner.add_elements(TimestampedValue(5, "noon"))
    assert runner.dead_letters[0].reason == DropReason.INVALID_TIMESTAMP


def test_operator_without_window_needs_windowed_records():
    runner = KeyedWindowedOperator(None, Sum()).local_runner()
    with pytest.raises(BadElementError, match="missing_window"):
        runner.add_elements(TimestampedValue(("k", 1), 5))


def test_a_trigger_that_can_finish_with_allowed_lateness_warns_about_data_loss():
    with pytest.warns(UserWarning, match="closed_window"):
        KeyedWindowedOperator(TimeWindows(10), Sum(), trigger=TriggerOption.at_watermark(), allowed_lateness=10)


def test_dead_letter_json_is_valid_and_keeps_integers():
    element = {"user": "a", "amount": 3.0, "ratio": 2.5, "missing": float("nan"), "inf": float("inf"), "ts": 17}
    assert element_json(element, ("amount", "ts")) == (
        '{"amount": 3, "inf": "inf", "missing": null, "ratio": 2.5, "ts": 17, "user": "a"}')


def test_max_future_skew_makes_elements_too_far_ahead_of_processing_time_bad():
    op = KeyedWindowedOperator(TimeWindows(10), Sum("n"), key="user", timestamp="at", max_future_skew=1_000,
                               on_bad_element="dead_letter")
    runner = op.local_runner(processing_time=5_000)
    runner.add_elements({"user": "a", "n": 1, "at": 6_000}, {"user": "a", "n": 2, "at": 6_001})
    assert [(d.reason, d.element["at"]) for d in runner.dead_letters] == [(DropReason.INVALID_TIMESTAMP, 6_001)]
    assert "is 1001 ms ahead of processing time 5000, more than max_future_skew (1000 ms)" in \
        runner.dead_letters[0].detail
    runner.advance_processing_time(1)
    runner.add_elements({"user": "a", "n": 4, "at": 6_001})  # a millisecond later it is in range
    assert [p.value for p in runner.finish()] == [5]


def test_max_future_skew_must_be_positive():
    with pytest.raises(ValidationError, match="max_future_skew"):
        KeyedWindowedOperator(TimeWindows(10), Sum("n"), max_future_skew=0)


def test_a_value_record_reads_each_field_and_names_a_missing_or_null_one():
    from accumulations import ToList

    op = KeyedWindowedOperator(TimeWindows(10), ToList(), key="k", timestamp="t", value={"a": "x", "b": "y"})
    reader = op.build_reader()
    assert reader.read({"k": 1, "t": 3, "x": 5, "y": "z"}, 0).value == {"a": 5, "b": "z"}
    with pytest.raises(BadElementError, match="no value field 'y'") as missing:
        reader.read({"k": 1, "t": 3, "x": 5}, 0)
    assert missing.value.reason == DropReason.INVALID_VALUE
    with pytest.raises(BadElementError, match=r"value field 'x' is null \(None\)"):
        reader.read({"k": 1, "t": 3, "x": None, "y": 2}, 0)
    for bad, message in (({}, "needs at least one field"), ({"a": ""}, "non-empty field names")):
        with pytest.raises(ValidationError, match=message):
            KeyedWindowedOperator(TimeWindows(10), ToList(), key="k", value=bad)


@pytest.mark.parametrize("accumulation", [Sum(), Max(), Min(), Mean(), ToList(), CountDistinct()],
                         ids=lambda a: type(a).__name__)
@pytest.mark.parametrize("null", [None, float("nan")], ids=["None", "NaN"])
def test_a_null_value_the_accumulation_folds_itself_is_a_bad_element(accumulation, null):
    """Before, ``Sum()`` failed on a null value with a TypeError and ``Max()`` left it out unseen."""
    raising = WindowedOperator(TimeWindows(10), accumulation).local_runner()
    with pytest.raises(BadElementError, match=r"invalid_value.*value is null"):
        raising.add_elements(TimestampedValue(2, 1), TimestampedValue(null, 2))
    op = WindowedOperator(TimeWindows(10), accumulation, on_bad_element="dead_letter")
    runner = op.local_runner()
    runner.add_elements(TimestampedValue(2, 1), TimestampedValue(null, 2), TimestampedValue(4, 3))
    assert [d.reason for d in runner.dead_letters] == [DropReason.INVALID_VALUE]
    assert runner.dropped_counts == {"invalid_value": 1}
    expected = WindowedOperator(TimeWindows(10), accumulation).run_local(
        TestStream().add_elements(TimestampedValue(2, 1), TimestampedValue(4, 3)))
    assert [p.value for p in runner.finish()] == [p.value for p in expected]


def test_a_null_value_is_counted_and_a_function_of_the_users_may_take_it():
    stream = [TimestampedValue(None, 1), TimestampedValue(3, 2)]
    assert [p.value for p in WindowedOperator(TimeWindows(10), Count()).run_local(
        TestStream().add_elements(*stream))] == [2]
    firsts = WindowedOperator(TimeWindows(10), Reduce(lambda a, b: a if a is not None else b))
    assert [p.value for p in firsts.run_local(TestStream().add_elements(*stream))] == [3]
    extracted = WindowedOperator(TimeWindows(10), Sum(), value=lambda v: v, on_bad_element="dead_letter")
    runner = extracted.local_runner()
    runner.add_elements(*stream)
    assert [d.detail for d in runner.dead_letters] == ["the value extractor's result is null (None)"]


def test_a_chained_stage_takes_a_null_upstream_pane_value_as_a_bad_element():
    """An upstream whose own function outputs None: the stage that sums its panes names it."""
    upstream = WindowedOperator(TimeWindows(10), Reduce(lambda a, b: None))
    chain = upstream.then(WindowedOperator(None, Sum(), on_bad_element="dead_letter"))
    runner = chain.local_runner()
    runner.add_elements(TimestampedValue(1, 1), TimestampedValue(2, 2), TimestampedValue(5, 11))
    outputs = runner.finish()
    dead = [d for r in runner.runners for d in r.dead_letters]
    assert [(d.reason, d.detail) for d in dead] == [(DropReason.INVALID_VALUE, "the upstream pane's value is null (None)")]
    assert [(p.window_start, p.value) for p in outputs if p.window_start == 10] == [(10, 5)]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.integers(), st.just(float("nan")),
                                                                    st.text(max_size=2)), max_size=3),
       st.sampled_from(["a", {"x": "a"}, {"x": "a", "y": "b"}, {"y": "b", "x": "c"}]))
def test_readable_value_rejects_exactly_what_the_element_path_rejects(row, extractor):
    """The array paths read a field or record value with ``readable_value``; None there must mean the
    element path drops the element as bad, and otherwise both read the same value."""
    from windowed_operator.elements import ElementReader, readable_value

    reader = ElementReader(keyed=False, key=None, timestamp=None, value=extractor, inherit_windows=False)
    read = readable_value(row, extractor)
    try:
        element_value = reader.read(row, default_timestamp=0).value
    except BadElementError:
        assert read is None
    else:
        assert read == element_value
