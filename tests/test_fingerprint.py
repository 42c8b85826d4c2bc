"""Which operator changes a restart may make to stored state, decided without Spark."""
import pytest

from accumulations import Count, InnerJoin, Mean, Sum
from triggers import AfterCount, TriggerOption
from windowed_operator import KeyedWindowedMergeOperator, KeyedWindowedOperator, SessionWindows, TimeWindows
from windowed_operator.state.fingerprint import IncompatibleRestartError, check_restart, restart_problems, state_fingerprint


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
    (dict(allowed_lateness=60_000),
     dict(allowed_lateness=5_000, late_data_output=True, on_bad_element="dead_letter", name="renamed")),
    (dict(trigger=TriggerOption.default().accumulating_fired_panes()),
     dict(trigger=TriggerOption.default().accumulating_and_retracting_fired_panes())),
    (dict(trigger=TriggerOption.default().accumulating_and_retracting_fired_panes()),
     dict(trigger=TriggerOption.default().accumulating_fired_panes())),
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


@pytest.mark.parametrize("before, after", [("discarding", "accumulating"), ("discarding", "accumulating_and_retracting"),
                                           ("accumulating", "discarding"),
                                           ("accumulating_and_retracting", "discarding")])
def test_a_switch_to_or_from_discarding_is_refused(before, after):
    """After discarding panes the accumulators lost the fired elements; after accumulating ones they
    hold elements already fired, which a discarding pane would count again (issue 56)."""
    modes = {"discarding": TriggerOption.default().discarding_fired_panes(),
             "accumulating": TriggerOption.default().accumulating_fired_panes(),
             "accumulating_and_retracting": TriggerOption.default().accumulating_and_retracting_fired_panes()}
    stored, current = fingerprint(op(trigger=modes[before])), fingerprint(op(trigger=modes[after]))
    with pytest.raises(IncompatibleRestartError, match=(
            f"accumulation mode changed from {stored['accumulation mode']} to {current['accumulation mode']}: "
            "after discarding panes")):
        check_restart(stored, current, "op")


def test_raising_allowed_lateness_is_refused_and_lowering_is_not():
    """A window the old lateness purged would re-open empty under a larger one (issue 56)."""
    with pytest.raises(IncompatibleRestartError, match=(
            "allowed lateness changed from 0 to 30000: windows the old lateness expired are purged")) as caught:
        check_restart(fingerprint(op()), fingerprint(op(allowed_lateness=30_000)), "op")
    assert "allowed lateness (not raised)" in str(caught.value)
    assert restart_problems(fingerprint(op(allowed_lateness=30_000)), fingerprint(op(allowed_lateness=29_999))) == []


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
    ("session rows in row shards", "per-key session rows in key shards", False),
    ("per-key windows in key shards", "session rows in row shards", True),
    ("per-key window rows in key shards", "window rows in row shards", True),
    ("window rows in row shards", "per-key window rows", False),
    ("session rows in row shards", "window rows in row shards", False),
    ("per-key pane rows in key shards", "window rows in row shards", False),
])
def test_a_restart_moves_session_and_window_rows_into_row_shards(stored, current, allowed):
    """Row shards hold the rows per-key records hold, so a restart moves per-key rows in (a
    checkpoint written before row shards, or with the removed ``spark.windowed_operator.rowShards``
    off); nothing chooses per-key rows any more, so nothing moves back; rows of another kind stay
    refused."""
    problems = restart_problems(fingerprint(op(), layout=stored), fingerprint(op(), layout=current))
    assert (problems == []) == allowed


def _readme_restart_lists() -> dict[str, str]:
    """The docs' "what a restart may change" lists: {"Exact": text, "Refused": text}."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "reliability.md").read_text()
    section = text[text.index("## Restarts with a changed operator"):]
    exact = section[section.index("\nExact:\n"):section.index("\nRefused:\n")]
    after = section.index("\nRefused:\n") + len("\nRefused:\n\n")
    refused = section[section.index("\nRefused:\n"):section.index("\n\n", after)]
    return {"Exact": exact, "Refused": refused}


def test_the_docs_restart_rules_are_the_fingerprints():
    """What the docs say a restart may change is ``SAFE_CHANGES`` (each refused direction named as
    ``REFUSED_DIRECTIONS`` says), and what it refuses is ``ADVICE``: the two cannot drift apart."""
    import re

    from windowed_operator.state.fingerprint import ADVICE, REFUSED_DIRECTIONS, SAFE_CHANGES

    lists = _readme_restart_lists()
    bold = {name: set(re.findall(r"\*\*([a-z ]+)\*\*", text)) for name, text in lists.items()}
    assert bold["Exact"] == set(SAFE_CHANGES)
    assert bold["Refused"] == set(ADVICE)
    for part, direction in REFUSED_DIRECTIONS.items():
        assert f"- **{part}** {direction}" in lists["Refused"]
        assert part in ADVICE, f"a refused direction of {part!r} needs its advice"
