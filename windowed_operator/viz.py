"""The pane timeline: one key's windows along event time, their panes along processing time.

The diagram people draw to explain the Beam model: the horizontal axis is event time, each window a
band over its ``[start, end)``; the vertical axis is when a pane was emitted (processing time, a
runner step, or a micro-batch); each pane is a marker in its window's band labelled with its value,
shaped by timing (early / on-time / late), and retractions are crossed out.  Needs matplotlib
(``pip install "windowed-operator[viz]"``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable, Iterable, Optional, Union



@dataclass(frozen=True)
class PanePoint:
    window_start: int
    window_end: int
    value: Any
    timing: str
    is_retraction: bool
    emitted: float  # processing time, step or batch id


STYLE = {"EARLY": ("o", "#4c9be8"), "ON_TIME": ("s", "#2ca02c"), "LATE": ("^", "#d62728")}


def points_from_runner(runner: Any, key: Optional[Hashable]) -> list[PanePoint]:
    """One key's panes from a local runner; the vertical axis is processing time when it moved,
    otherwise the runner step that emitted each pane."""
    times = [pt for _, pt, _ in runner.emitted_at]
    use_time = len(set(times)) > 1
    return [PanePoint(p.window_start, p.window_end, p.value, p.timing.value, p.is_retraction,
                      pt if use_time else step)
            for p, (step, pt, _) in zip(runner.outputs, runner.emitted_at) if p.key == key]


def points_from_rows(rows: Iterable[dict], key: Any, emitted_field: str = "batch_id") -> list[PanePoint]:
    """One key's panes from Spark output rows (dicts with times in ms and ``emitted_field``)."""
    return [PanePoint(r["window_start"], r["window_end"], r["value"], r["timing"], r["is_retraction"],
                      r[emitted_field]) for r in rows if r.get("key") == key]


def _label(value: Any) -> str:
    text = f"{value:.3g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 14 else text[:13] + "…"


def plot_pane_timeline(points: list[PanePoint], path: Union[str, Path], *, title: str = "",
                       time_unit_ms: int = 1_000, emitted_label: str = "emitted (step)") -> Path:
    """Draw the timeline and save it as PNG; returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    if not points:
        raise ValueError("no panes to plot for this key")
    origin = min(p.window_start for p in points)
    scale = float(time_unit_ms)
    emitted = sorted({p.emitted for p in points})
    lo, hi = emitted[0], emitted[-1]
    pad = max(1.0, (hi - lo) * 0.08)
    windows = sorted({(p.window_start, p.window_end) for p in points})
    lanes: dict[tuple[int, int], int] = {}
    ends: list[int] = []
    for window in windows:  # overlapping windows (hopping, sessions) get separate lanes
        lane = next((i for i, end in enumerate(ends) if end <= window[0]), len(ends))
        if lane == len(ends):
            ends.append(window[1])
        else:
            ends[lane] = window[1]
        lanes[window] = lane
    n_lanes = max(1, len(ends))
    fig, ax = plt.subplots(figsize=(10, 5.5))
    for (start, end), lane in lanes.items():
        x0, width = (start - origin) / scale, (end - start) / scale
        ax.add_patch(Rectangle((x0, lo - pad), width, hi - lo + 2 * pad, facecolor=f"C{lane % 10}", alpha=0.08,
                               edgecolor=f"C{lane % 10}", linewidth=1))
    for p in points:
        marker, colour = STYLE.get(p.timing, ("o", "grey"))
        lane = lanes[(p.window_start, p.window_end)]
        x = (p.window_start - origin + (p.window_end - p.window_start) * (lane + 1) / (n_lanes + 1)) / scale
        if p.is_retraction:  # drawn just below the pane it precedes, so both stay visible
            y = p.emitted - pad * 0.3
            ax.scatter([x], [y], marker="x", color=colour, s=70, zorder=3)
            ax.annotate(_label(p.value), (x, y), textcoords="offset points", xytext=(6, -10), fontsize=8,
                        color=colour)
        else:
            ax.scatter([x], [p.emitted], marker=marker, color=colour, s=60, zorder=3)
            ax.annotate(_label(p.value), (x, p.emitted), textcoords="offset points", xytext=(6, 3), fontsize=8)
    ax.set_xlabel(f"event time ({'s' if time_unit_ms == 1000 else f'x{time_unit_ms} ms'} from the first window)")
    ax.set_ylabel(emitted_label)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlim(0, (max(p.window_end for p in points) - origin) / scale)
    ax.set_title(title or "pane timeline")
    handles = [Line2D([], [], marker=m, color=c, linestyle="", label=t.lower().replace("_", "-"))
               for t, (m, c) in STYLE.items()]
    handles.append(Line2D([], [], marker="x", color="black", linestyle="", label="retraction"))
    ax.legend(handles=handles, loc="upper left", fontsize=8)
    ax.grid(alpha=0.2)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
