"""The trigger protocol exercised directly on one window's state, including merges."""
from triggers import (AfterAll, AfterAny, AfterCount, AfterEach, AfterProcessingTime, AfterWatermark,
                      DefaultTrigger, Repeatedly, TriggerContext)
from windowed_operator.windows import Window


def ctx(window=Window(0, 10), state=None, timers=None, watermark=-100, pt=0):
    return TriggerContext(window, {} if state is None else state, {} if timers is None else timers, watermark, pt)


def test_after_count_counts_bundles_and_merges_by_summing():
    t = AfterCount(3)
    a, b = ctx(), ctx()
    t.on_element(a, 2)
    t.on_element(b, 1)
    assert not t.should_fire(a)
    merged = ctx(Window(0, 20))
    t.on_merge(merged, [a, b])
    assert t.should_fire(merged) and t.on_fire(merged)
    t.reset(merged)
    assert not t.should_fire(merged)


def test_after_processing_time_keeps_the_earliest_deadline_on_merge():
    t = AfterProcessingTime(10)
    a, b = ctx(pt=5), ctx(pt=1)
    t.on_element(a)
    t.on_element(b)
    merged = ctx(Window(0, 20), pt=3)
    t.on_merge(merged, [a, b])
    assert merged.timers == {"@processing_time": 11}
    merged.processing_time = 11
    assert t.should_fire(merged)


def test_after_watermark_sets_an_end_of_window_timer_and_moves_to_late_after_firing():
    t = AfterWatermark(late=AfterCount(1))
    c = ctx()
    t.on_element(c)
    assert c.timers == {"@watermark": 10}  # due once the watermark is past the max timestamp 9
    c.watermark = 9
    assert not t.should_fire(c)
    c.watermark = 10
    assert t.should_fire(c) and t.on_fire(c) is False
    assert c.timers == {}
    t.on_element(c)
    assert t.should_fire(c)


def test_after_watermark_merge_is_early_again_when_the_merged_window_ends_later():
    t = AfterWatermark(early=AfterCount(1), late=AfterCount(1))
    late_src = ctx(Window(0, 10), state={"late": True}, watermark=12)
    merged = ctx(Window(0, 25), watermark=12)
    t.on_merge(merged, [late_src])
    assert merged.get("late") is None and merged.timers == {"@watermark": 25}


def test_default_trigger_never_finishes():
    t = DefaultTrigger()
    assert not t.should_fire(ctx(watermark=9))
    c = ctx(watermark=10)
    assert t.should_fire(c) and t.on_fire(c) is False and not t.may_finish()


def test_repeatedly_resets_a_finished_child():
    t = Repeatedly(AfterCount(1))
    c = ctx()
    t.on_element(c)
    assert t.should_fire(c) and t.on_fire(c) is False
    assert not t.should_fire(c)


def test_composites_report_whether_they_can_finish():
    assert AfterAny(AfterCount(1), Repeatedly(AfterCount(1))).may_finish()
    assert not AfterAll(AfterCount(1), Repeatedly(AfterCount(1))).may_finish()
    assert not AfterEach(AfterCount(1), Repeatedly(AfterCount(2))).may_finish()
    assert Repeatedly(AfterCount(1)).orfinally(AfterCount(2)).may_finish()
