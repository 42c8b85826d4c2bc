"""Which operator changes a restart may make to stored state, decided without Spark."""
import pytest

from accumulations import Count, InnerJoin, Mean, Sum
from triggers import AfterCount, TriggerOption
from windowed_operator import KeyedWindowedMergeOperator, KeyedWindowedOperator, SessionWindows, TimeWindows
from windowed_operator.fingerprint import IncompatibleRestartError, check_restart, restart_problems, state_fingerprint


def fingerprint(op, **kw):
    options = dict(key_groups=16, layout="windows per key", time_mode="EventTime", state_version=5, key_column="k")
    options.update(kw)
    return state_fingerprint(op, **options)


def op(**kw):
    window = kw.pop("window", TimeWindows(10_000))
    accumulation = kw.pop("accumulation", Sum("v"))
    return KeyedWindowedOperator(window, accumulation, **kw)


@pytest.mark.parametrize("changed, part", [
    (dict(window=TimeWindows(20_000)), "window"),
    (dict(window=TimeWindows(10_000, period=5_000)), "window"),
    (dict(window=SessionWindows(10_000)), "window"),
    (dict(accumulation=Mean("v")), "accumulation"),
    (dict(accumulation=Sum("w")), "accumulation"),
    (dict(accumulation=Count()), "accumulation"),
    (dict(trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=3)), "trigger"),
    (dict(trigger=AfterCount(2)), "trigger"),
    (dict(timestamp_combiner="earliest"), "timestamp combiner"),
])
def test_a_change_the_state_cannot_follow_is_named(changed, part):
    problems = restart_problems(fingerprint(op()), fingerprint(op(**changed)))
    assert problems and problems[0].startswith(f"{part} changed from ")


@pytest.mark.parametrize("execution, part", [
    (dict(key_groups=3), "key groups changed from 16 to 3: keys are hashed into the stored number of groups: pass "
                         "key_groups=16 to apply()"),
    (dict(layout="columnar pane table"), "state layout changed"),
    (dict(time_mode="ProcessingTime"), "time mode changed"),
    (dict(key_column="user_id"), "key column changed from k to user_id"),
    (dict(state_version=6), "state version changed"),
])
def test_a_change_of_execution_the_state_cannot_follow_is_named(execution, part):
    problems = restart_problems(fingerprint(op()), fingerprint(op(), **execution))
    assert len(problems) == 1 and problems[0].startswith(part)


@pytest.mark.parametrize("before, after", [
    (dict(), dict(allowed_lateness=60_000, late_data_output=True, on_bad_element="dead_letter", name="renamed")),
    (dict(trigger=TriggerOption.default().accumulating_fired_panes()),
     dict(trigger=TriggerOption.default().accumulating_and_retracting_fired_panes())),
    (dict(trigger=TriggerOption.default().accumulating_and_retracting_fired_panes()),
     dict(trigger=TriggerOption.default().discarding_fired_panes())),
    (dict(trigger=TriggerOption.default().accumulating_fired_panes()),
     dict(trigger=TriggerOption.default().accumulating_fired_panes().fire_only_updated_panes())),
])
def test_safe_changes_are_allowed(before, after):
    assert restart_problems(fingerprint(op(**before)), fingerprint(op(**after))) == []
    check_restart(fingerprint(op(**before)), fingerprint(op(**after)), "op")


def test_version_7_continues_version_6_state_and_not_the_other_way():
    """Version 7 reads version 6's records (``group_state.read_record``); version 6 cannot read 7's."""
    assert restart_problems(fingerprint(op(), state_version=6), fingerprint(op(), state_version=7)) == []
    (problem,) = restart_problems(fingerprint(op(), state_version=7), fingerprint(op(), state_version=6))
    assert problem.startswith("state version changed from 7 to 6")
    assert restart_problems(fingerprint(op(), state_version=5), fingerprint(op(), state_version=7))


@pytest.mark.parametrize("stored", [6, 7])
def test_version_8_continues_versions_6_and_7_and_neither_continues_8(stored):
    """Version 8 reads the window log's parts of version 7 beside its own (``window_log.part_accs``)."""
    assert restart_problems(fingerprint(op(), state_version=stored), fingerprint(op(), state_version=8)) == []
    (problem,) = restart_problems(fingerprint(op(), state_version=8), fingerprint(op(), state_version=stored))
    assert problem.startswith(f"state version changed from 8 to {stored}")


def test_discarding_to_accumulating_is_refused_because_the_accumulators_lost_fired_elements():
    before = op(trigger=TriggerOption.default().discarding_fired_panes())
    after = op(trigger=TriggerOption.default().accumulating_fired_panes())
    with pytest.raises(IncompatibleRestartError, match="accumulation mode changed from discarding to accumulating"):
        check_restart(fingerprint(before), fingerprint(after), "op")


def test_several_changes_are_all_named_with_what_may_change():
    with pytest.raises(IncompatibleRestartError) as caught:
        check_restart(fingerprint(op()), fingerprint(op(window=TimeWindows(5_000)), key_groups=4), "operator 'x'")
    text = str(caught.value)
    assert text.startswith("operator 'x': ") and "window changed" in text and "key groups changed" in text
    assert "changes a restart may make: allowed lateness" in text


def test_no_stored_fingerprint_means_a_new_checkpoint():
    check_restart(None, fingerprint(op()), "op")


def test_functions_in_the_configuration_compare_by_name_not_by_address():
    def pair(left, right):
        return (left, right)

    def merge(fn):
        return KeyedWindowedMergeOperator(TimeWindows(10_000), InnerJoin(join=fn))

    first, second = fingerprint(merge(pair)), fingerprint(merge(pair))
    assert "0x" not in first["accumulation"] and first == second


@pytest.mark.parametrize("stored, current, allowed", [
    ("per-key session rows in key shards", "session rows in row shards", True),
    ("per-key session rows", "session rows in row shards", True),
    ("session rows in row shards", "per-key session rows in key shards", True),
    ("per-key windows in key shards", "session rows in row shards", True),
    ("per-key window rows in key shards", "window rows in row shards", True),
    ("window rows in row shards", "per-key window rows", True),
    ("session rows in row shards", "window rows in row shards", False),
    ("per-key pane rows in key shards", "window rows in row shards", False),
])
def test_a_restart_moves_session_and_window_rows_into_row_shards_and_back(stored, current, allowed):
    """Row shards hold the rows per-key records hold, so a restart may switch either way
    (``spark.windowed_operator.rowShards``); rows of another kind stay refused."""
    problems = restart_problems(fingerprint(op(), layout=stored), fingerprint(op(), layout=current))
    assert (problems == []) == allowed
