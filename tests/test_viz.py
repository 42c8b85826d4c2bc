"""The pane timeline plot: one key's panes drawn along event time and emission, saved as PNG;
overlapping windows in lanes of their own, the watermark line, the legend outside the plot."""
import itertools

import matplotlib.pyplot as plt
from hypothesis import given, settings
from hypothesis import strategies as st

from accumulations import Sum
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows
from windowed_operator.testing import TestStream, TimestampedValue as TV
from windowed_operator.viz import (pane_timeline_figure, plot_pane_timeline, points_from_rows, points_from_runner,
                                   window_lanes)


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
    assert [p.watermark for p in points_from_rows(rows, "b", watermarks={3: 5, 4: 8})] == [8]


def _hopping_points():
    trigger = (TriggerOption.at_watermark().with_early_firings_at_every(count=1).with_late_firings_at_every(count=1)
               .accumulating_and_retracting_fired_panes())
    op = KeyedWindowedOperator(TimeWindows(10_000).slide_by(5_000), Sum(), allowed_lateness=60_000, trigger=trigger)
    runner = op.local_runner()
    runner.run(TestStream().add_elements(TV(("u", 3), 1_000), TV(("u", 2), 7_000)).advance_watermark_to(11_000)
               .add_elements(TV(("u", 1), 12_000)).advance_watermark_to(16_000).add_elements(TV(("u", 5), 8_000))
               .advance_watermark_to(40_000))
    return points_from_runner(runner, "u")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 100), st.integers(1, 50)).map(lambda t: (t[0], t[0] + t[1])), min_size=1))
def test_windows_of_one_lane_never_overlap(windows):
    lanes = window_lanes(windows)
    assert set(lanes) == set(windows)
    for a, b in itertools.combinations(lanes, 2):
        if lanes[a] == lanes[b]:
            assert a[1] <= b[0] or b[1] <= a[0], (a, b)
    assert max(lanes.values()) + 1 <= len(set(windows))


def test_overlapping_windows_each_have_a_bar_and_a_column_of_their_own():
    """Hopping windows: every window a bar in the strip, bars of one lane apart, and the panes of
    different windows emitted together never drawn on one spot."""
    points = _hopping_points()
    fig = pane_timeline_figure(points)
    strip, ax = fig.axes[0], fig.axes[1]
    bars = [(round(x, 6), round(x + w, 6), round(y)) for c in strip.collections for (x, y), w in
            [(p.vertices[0], p.vertices[2][0] - p.vertices[0][0]) for p in c.get_paths()]]
    windows = {(p.window_start, p.window_end) for p in points}
    assert len(bars) == len(windows) == 4
    for a, b in itertools.combinations(bars, 2):
        if a[2] == b[2]:
            assert a[1] <= b[0] or b[1] <= a[0], (a, b)
    spots = [tuple(offset) for c in ax.collections if c.get_gid() != "watermark" for offset in c.get_offsets()]
    for emitted in {p.emitted for p in points}:
        panes = [p for p in points if p.emitted == emitted and not p.is_retraction]
        xs = [x for x, y in spots if y == emitted]  # (a retraction stands below its pane)
        assert len(xs) == len(panes) and len(set(xs)) == len(xs), (emitted, xs)
        for p in panes:  # each inside its own window
            assert sum((p.window_start + 5_000) / 1000 < x < (p.window_end + 5_000) / 1000 for x in xs) >= 1
    plt.close(fig)


def test_the_watermark_line_legend_outside_and_the_last_window_inside():
    points = _hopping_points()
    fig = pane_timeline_figure(points)
    ax = fig.axes[1]
    line = next(line for line in ax.get_lines() if line.get_label() == "watermark")
    xs, ys = line.get_xdata(), line.get_ydata()
    left, right = ax.get_xlim()
    for p in points:  # at each emission the line passes through where the watermark stood (the edge beyond)
        x = min(max((p.watermark + 5_000) / 1000, left), right)
        assert any(abs(a - x) < 1e-9 and abs(b - p.emitted) < 1e-9 for a, b in zip(xs, ys)), (p.emitted, x)
    assert any(abs(x - 16) < 1e-9 for x in xs)  # the watermark at 11 s, 16 s from the first window's start
    at = {p.emitted: min(max((p.watermark + 5_000) / 1000, left), right) for p in points}
    assert all(a <= at[b] + 1e-9 for a, b in zip(xs, ys))  # never ahead of where it stood at an emission
    assert right > max(p.window_end + 5_000 for p in points) / 1000  # the last band is not cut
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend, plot = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
    assert not legend.overlaps(plot), (legend, plot)
    labels = [t for t in ax.texts]
    boxes = [t.get_window_extent(renderer) for t in labels]
    clashes = [(a.get_text(), b.get_text()) for (a, ba), (b, bb) in itertools.combinations(zip(labels, boxes), 2)
               if ba.overlaps(bb)]
    assert not clashes  # a pane's label and its retraction's, at one spot, both readable
    plt.close(fig)


def test_a_pane_its_retraction_and_a_late_pane_at_one_spot_keep_their_labels_apart():
    """Many emissions squeeze the vertical axis: a pane and its retraction at one spot, a LATE pane
    a step later, labels all readable (issue 58: they overprinted)."""
    from windowed_operator.viz import PanePoint

    points = [PanePoint(0, 10_000, 3, "EARLY", False, 0, 0), PanePoint(0, 10_000, -3, "ON_TIME", True, 40, 11_000),
              PanePoint(0, 10_000, 12, "ON_TIME", False, 40, 11_000),
              PanePoint(0, 10_000, -12, "LATE", True, 41, 11_000), PanePoint(0, 10_000, 14, "LATE", False, 41, 11_000),
              PanePoint(5_000, 15_000, 1, "EARLY", False, 80, 12_000)]
    fig = pane_timeline_figure(points)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = fig.axes[1].texts
    clashes = [(a.get_text(), b.get_text()) for a, b in itertools.combinations(texts, 2)
               if a.get_window_extent(renderer).overlaps(b.get_window_extent(renderer))]
    assert not clashes
    plt.close(fig)
