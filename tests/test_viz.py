"""The pane timeline plot: one key's panes drawn along event time and emission, saved as PNG."""
from accumulations import Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows
from windowed_operator.testing import TestStream, TimestampedValue as TV
from windowed_operator.viz import plot_pane_timeline, points_from_rows, points_from_runner


def test_timeline_of_sessions_with_early_late_and_retractions(tmp_path):
    trigger = (TriggerOption.at_watermark().with_early_firings_at_every(count=1).with_late_firings_at_every(count=1)
               .accumulating_and_retracting_fired_panes())
    op = KeyedWindowedOperator(SessionWindows(10_000), Sum(), allowed_lateness=60_000, trigger=trigger)
    runner = op.local_runner()
    runner.run(TestStream().add_elements(TV(("u", 3), 1_000), TV(("v", 9), 1_000)).add_elements(TV(("u", 2), 30_000))
               .advance_watermark_to(12_000).add_elements(TV(("u", 1), 5_000)).advance_watermark_to(200_000))
    points = points_from_runner(runner, "u")
    assert len(points) == sum(1 for p in runner.outputs if p.key == "u")
    assert {p.timing for p in points} == {"EARLY", "ON_TIME", "LATE"} and any(p.is_retraction for p in points)
    # emission steps follow the runner: a later step never precedes an earlier one
    assert [p.emitted for p in points] == sorted(p.emitted for p in points)
    path = plot_pane_timeline(points, tmp_path / "u.png", title="u")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_points_from_spark_rows_use_the_batch_as_emission():
    rows = [{"key": "a", "window_start": 0, "window_end": 10, "value": 1, "timing": "EARLY", "is_retraction": False,
             "batch_id": 3}, {"key": "b", "window_start": 0, "window_end": 10, "value": 2, "timing": "EARLY",
                              "is_retraction": False, "batch_id": 4}]
    assert [p.emitted for p in points_from_rows(rows, "a")] == [3]
