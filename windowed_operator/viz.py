"""The pane timeline: one key's windows along event time, their panes along processing time.

The diagram people draw to explain the Beam model: the horizontal axis is event time; the vertical
axis is when a pane was emitted (processing time, a runner step, or a micro-batch); each pane is a
marker inside its window's span labelled with its value, shaped by timing (early / on-time / late),
and retractions are crossed out.  The watermark is the line of where event time stood at each
emission: a pane fired before the line reaches its window's end is EARLY, the first one after it
ON_TIME, later ones LATE.

Overlapping windows (hopping windows, sessions before and after a merge) each get a lane: a strip
above the timeline draws every window as a bar in its lane, so none hides another, and in the
timeline each lane's panes stand in a column of their own inside the window.  A retraction stands just
below the pane it precedes, its label on the other side, and labels that would touch move apart;
the legend stands outside the plot.  Needs matplotlib (``pip install "windowed-operator[viz]"``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable, Iterable, Mapping, Optional, Union


@dataclass(frozen=True)
class PanePoint:
    window_start: int
    window_end: int
    value: Any
    timing: str
    is_retraction: bool
    emitted: float  # processing time, step or batch id
    watermark: Optional[int] = None  # the input watermark when it was emitted (ms), if known


STYLE = {"EARLY": ("o", "#4c9be8"), "ON_TIME": ("s", "#2ca02c"), "LATE": ("^", "#d62728")}


def points_from_runner(runner: Any, key: Optional[Hashable]) -> list[PanePoint]:
    """One key's panes from a local runner; the vertical axis is processing time when it moved,
    otherwise the runner step that emitted each pane."""
    times = [pt for _, pt, _ in runner.emitted_at]
    use_time = len(set(times)) > 1
    return [PanePoint(p.window_start, p.window_end, p.value, p.timing.value, p.is_retraction,
                      pt if use_time else step, watermark)
            for p, (step, pt, watermark) in zip(runner.outputs, runner.emitted_at) if p.key == key]


def points_from_rows(rows: Iterable[dict], key: Any, emitted_field: str = "batch_id",
                     watermarks: Optional[Mapping[Any, Optional[int]]] = None) -> list[PanePoint]:
    """One key's panes from Spark output rows (dicts with times in ms and ``emitted_field``);
    ``watermarks``: the watermark (ms) each emission (value of ``emitted_field``) ran with."""
    return [PanePoint(r["window_start"], r["window_end"], r["value"], r["timing"], r["is_retraction"],
                      r[emitted_field], (watermarks or {}).get(r[emitted_field])) for r in rows if r.get("key") == key]


def window_lanes(windows: Iterable[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """A lane per window such that the windows of one lane do not overlap (the first lane free)."""
    lanes: dict[tuple[int, int], int] = {}
    ends: list[int] = []
    for window in sorted(set(windows)):
        lane = next((i for i, end in enumerate(ends) if end <= window[0]), len(ends))
        if lane == len(ends):
            ends.append(window[1])
        else:
            ends[lane] = window[1]
        lanes[window] = lane
    return lanes


def _label(value: Any) -> str:
    text = f"{value:.3g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 14 else text[:13] + "…"


def pane_timeline_figure(points: list[PanePoint], *, title: str = "", time_unit_ms: int = 1_000,
                         emitted_label: str = "emitted (step)") -> Any:
    """The timeline as a matplotlib ``Figure``: ``fig.axes[0]`` the windows' lanes, ``fig.axes[1]``
    the panes and the watermark line (label ``watermark``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    if not points:
        raise ValueError("no panes to plot for this key")
    origin = min(p.window_start for p in points)
    scale = float(time_unit_ms)
    emitted = sorted({p.emitted for p in points})
    lo, hi = emitted[0], emitted[-1]
    pad = max(1.0, (hi - lo) * 0.08)
    lanes = window_lanes((p.window_start, p.window_end) for p in points)
    n_lanes = max(lanes.values()) + 1
    first_x, last_x = 0.0, (max(p.window_end for p in points) - origin) / scale
    margin = max(last_x - first_x, 1e-9) * 0.03

    def x_of(ms: float) -> float:
        return (ms - origin) / scale

    fig, (strip, ax) = plt.subplots(2, 1, sharex=True, figsize=(10, 6.5 + 0.15 * n_lanes),
                                    gridspec_kw={"height_ratios": [min(0.4 + 0.25 * n_lanes, 2.5), 5]})
    for (start, end), lane in lanes.items():
        colour = f"C{lane % 10}"
        strip.broken_barh([(x_of(start), x_of(end) - x_of(start))], (lane + 0.15, 0.7), facecolors=colour,
                          alpha=0.35, edgecolor=colour)
        for x in (x_of(start), x_of(end)):  # the window's bounds, through the timeline in its lane's colour
            ax.axvline(x, color=colour, alpha=0.35, linewidth=0.8, linestyle=(0, (4, 3)), zorder=1)
    strip.set_ylim(n_lanes, 0)
    strip.set_yticks([lane + 0.5 for lane in range(n_lanes)], [f"lane {lane}" for lane in range(n_lanes)],
                     fontsize=7)
    strip.set_title(title or "pane timeline")
    strip.set_ylabel("windows", fontsize=8)

    labels: list[tuple[float, float, str, bool, str]] = []  # x, y, text, of a retraction, colour
    for p in points:
        marker, colour = STYLE.get(p.timing, ("o", "grey"))
        lane = lanes[(p.window_start, p.window_end)]
        x = x_of(p.window_start + (p.window_end - p.window_start) * (lane + 1) / (n_lanes + 1))
        y = p.emitted - pad * 0.3 if p.is_retraction else p.emitted  # a retraction just below the pane it precedes
        ax.scatter([x], [y], marker="x" if p.is_retraction else marker, color=colour,
                   s=70 if p.is_retraction else 60, zorder=3)
        labels.append((x, y, _label(p.value), p.is_retraction, colour))
    marks = sorted({(p.emitted, p.watermark) for p in points if p.watermark is not None})
    left, right = first_x - margin, last_x + margin
    shown = [(min(max(x_of(w), left), right), y) for y, w in marks]  # beyond the windows: at the edge
    if shown:  # where event time stood at each emission, a step per emission
        xs, ys = [x for x, _ in shown], [y for _, y in shown]
        # (pre: at each emission the line first rises at the old watermark, then moves to the new one)
        ax.step(xs, ys, where="pre", color="black", linewidth=1.2, alpha=0.7, label="watermark", zorder=2)
        for x, y in shown:
            edge = "<" if x == left else ">" if x == right else "."
            ax.scatter([x], [y], color="black", marker=edge, s=25 if edge != "." else 8, zorder=2, gid="watermark")
    ax.set_xlabel(f"event time ({'s' if time_unit_ms == 1000 else f'x{time_unit_ms} ms'} from the first window)")
    ax.set_ylabel(emitted_label)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlim(left, right)  # the last window's end inside the plot
    handles = [Line2D([], [], marker=m, color=c, linestyle="", label=t.lower().replace("_", "-"))
               for t, (m, c) in STYLE.items()]
    handles.append(Line2D([], [], marker="x", color="black", linestyle="", label="retraction"))
    if shown:
        handles.append(Line2D([], [], color="black", label="watermark"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(handles), fontsize=8,
              frameon=False)
    ax.grid(alpha=0.2)
    fig.tight_layout()
    _place_labels(fig, ax, labels)
    return fig


def _place_labels(fig: Any, ax: Any, labels: list[tuple[float, float, str, bool, str]]) -> None:
    """Each marker's label beside it: a pane's on the right going up, a retraction's on the left going
    down; in one column, a label that would touch the one before it moves on by a line (a pane, its
    retraction and a LATE pane a step later stay readable however squeezed the emission axis)."""
    line = 10.0  # points: an 8-point label and a little air
    to_points = 72.0 / fig.dpi
    for retraction in (False, True):
        columns: dict[float, list[tuple[float, float, str, str]]] = {}
        for x, y, text, is_retraction, colour in labels:
            if is_retraction == retraction:
                columns.setdefault(round(x, 9), []).append((x, y, text, colour))
        for column in columns.values():
            column.sort(key=lambda label: label[1], reverse=retraction)
            last: Optional[float] = None
            for x, y, text, colour in column:
                at = ax.transData.transform((x, y))[1] * to_points
                want = at - 4 if retraction else at + 3
                if last is not None:
                    want = min(want, last - line) if retraction else max(want, last + line)
                last = want
                ax.annotate(text, (x, y), textcoords="offset points", xytext=(-6 if retraction else 6, want - at),
                            fontsize=8, color=colour if retraction else "black", ha="right" if retraction else "left",
                            va="top" if retraction else "bottom", zorder=4)


def plot_pane_timeline(points: list[PanePoint], path: Union[str, Path], *, title: str = "",
                       time_unit_ms: int = 1_000, emitted_label: str = "emitted (step)") -> Path:
    """Draw the timeline and save it as PNG; returns the path."""
    import matplotlib.pyplot as plt

    fig = pane_timeline_figure(points, title=title, time_unit_ms=time_unit_ms, emitted_label=emitted_label)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
