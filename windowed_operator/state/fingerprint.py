"""What a checkpoint's state depends on, and which changes a restart may make to it.

A restarted streaming query finds the state its previous run left, laid out for the operator of
that run.  If the window, the accumulation or the key groups changed, the old state means
something else (a window of the old size, an accumulator of another type, keys in other groups),
and using it silently gives wrong panes.  So the state carries a *fingerprint* of the operator
that wrote it, and loading it compares every part with the running operator: a difference in a
part the state depends on stops the query with a message naming the part, both values and what
to do; the changes listed in ``SAFE_CHANGES`` are allowed (the new values are adopted).

Pure Python: the Spark runner stores and checks it, the rules live here.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Optional

from triggers.option import AccumulationMode

from .layouts import LAYOUT_MIGRATIONS, VERSION_MIGRATIONS, record_layout

#: Parts of the fingerprint a restart may change, and why the panes then equal those of an
#: uninterrupted run with the new operator (from the restart on).  Some parts only in one direction:
#: ``ADVICE`` says why the other is refused.
SAFE_CHANGES: dict[str, str] = {
    "allowed lateness": "lowered only: every window the new lateness keeps the old one kept too, with the same "
                        "elements; windows it expires are purged at the next watermark",
    "accumulation mode": "between accumulating and accumulating-and-retracting: both keep every element of the "
                         "window and the last pane fired (for retractions)",
    "only updated panes": "only decides whether an unchanged pane is emitted (the last pane fired is kept in every "
                          "mode)",
    "watermark": "the watermark policy decides when state fires, not what it holds (a watermark never moves back: "
                 "a larger delay takes effect once event times pass the stored watermark)",
    "outputs": "late-data and dead-letter outputs, names, bad-element handling and fired_by hold no state",
}

#: Changes of the parts above that are refused all the same (``_change_is_safe``), named for the docs.
REFUSED_DIRECTIONS: dict[str, str] = {
    "allowed lateness": "raised",
    "accumulation mode": "to or from discarding",
}

#: Parts whose change makes the stored state mean something else, and what to do about each.
ADVICE: dict[str, str] = {
    "state version": "this library writes a newer state layout; migrate the checkpoint or start a new one",
    "window": "windows of another shape cannot be rebuilt from stored windows: start a new checkpoint",
    "accumulation": "stored accumulators have the old accumulation's type: start a new checkpoint",
    "value column": "stored accumulators fold the old column: start a new checkpoint",
    "key column": "stored state is keyed by the old key: start a new checkpoint",
    "trigger": "open windows hold the old trigger's state and timers: start a new checkpoint (or let them close "
               "first)",
    "timestamp combiner": "open panes hold timestamps for the old combiner: start a new checkpoint",
    "key groups": "keys are hashed into the stored number of groups: pass key_groups={stored} to apply()",
    "state layout": "the new options run on another execution path (the columnar paths serve the default "
                    "trigger and early/late firings with vectorized=True), whose state is laid out differently: "
                    "start a new checkpoint or restore the options that chose the stored layout",
    "time mode": "timers of the other time domain are stored (processing-time triggers, a fixed-lag or per-partition "
                 "watermark and idle timeouts run in processing-time mode): start a new checkpoint",
    "accumulation mode": "after discarding panes the accumulators hold only the elements since the last pane, "
                         "and after accumulating panes they hold elements already fired: a restart may switch "
                         "between accumulating and accumulating-and-retracting only (start a new checkpoint)",
    "allowed lateness": "windows the old lateness expired are purged and would re-open as new windows under a "
                        "larger one: a restart may only lower it (start a new checkpoint)",
}

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class IncompatibleRestartError(RuntimeError):
    """The checkpoint's state was written by an operator this one cannot continue."""


def _stable(value: Any) -> str:
    """A description that is equal across processes for an equal configuration (no object addresses)."""
    return _ADDRESS.sub("", repr(value))


def state_fingerprint(operator: Any, *, key_groups: int, layout: str, time_mode: str, state_version: int,
                      key_column: Optional[str] = None) -> dict[str, str]:
    """Every part of ``operator`` and its execution that stored state depends on, as text."""
    trigger = operator.trigger
    return {
        "state version": str(state_version),
        "window": _stable(operator.window),
        "accumulation": _stable(operator.core_accumulation()),
        "value column": str(operator.value_column()) + (f" of record {operator.value}" if isinstance(
            getattr(operator, "value", None), dict) else ""),
        "key column": str(key_column),
        "trigger": trigger.to_trigger().describe(),
        "timestamp combiner": str(operator.timestamp_combiner.value),
        "key groups": str(key_groups),
        "state layout": layout,
        "time mode": time_mode,
        "allowed lateness": str(operator.allowed_lateness),
        "accumulation mode": trigger.mode.value,
        "only updated panes": str(trigger.only_updated_panes),
        "watermark": _stable(operator.watermark),
        "outputs": f"late_data_output={operator.late_data_output}, on_bad_element={operator.on_bad_element}"
                   + (", fired_by=True" if getattr(operator, "fired_by", False) else ""),
    }


def _mode_change_is_safe(stored: str, current: str) -> bool:
    """Discarding panes leaves accumulators of the elements since the last pane, accumulating ones of
    every element: neither continues as the other."""
    discarding = AccumulationMode.DISCARDING.value
    return current == stored or discarding not in (stored, current)


def _lateness_change_is_safe(stored: str, current: str) -> bool:
    """Lowering: a window the new lateness keeps, the old kept with the same elements.  Raising: a
    window the old lateness purged would come back empty (state says nothing of purged windows)."""
    try:
        return int(current) <= int(stored)
    except ValueError:
        return False


def _change_is_safe(part: str, stored: str, current: str) -> bool:
    """Whether ``part`` may change from ``stored`` to ``current`` (see ``SAFE_CHANGES``)."""
    if part == "accumulation mode":
        return _mode_change_is_safe(stored, current)
    if part == "allowed lateness":
        return _lateness_change_is_safe(stored, current)
    if part == "state version":
        return (stored, current) in VERSION_MIGRATIONS
    if part == "state layout":
        stored, current = record_layout(stored), record_layout(current)
        return stored == current or (stored, current) in LAYOUT_MIGRATIONS
    return part in SAFE_CHANGES


def restart_problems(stored: Mapping[str, str], current: Mapping[str, str]) -> list[str]:
    """One line per changed part that the stored state cannot follow (empty: the restart is safe)."""
    problems = []
    for part, now in current.items():
        before = stored.get(part)
        if before is None or before == now or _change_is_safe(part, before, now):
            continue
        advice = ADVICE.get(part, "start a new checkpoint").format(stored=before)
        problems.append(f"{part} changed from {before} to {now}: {advice}")
    return problems


def check_restart(stored: Optional[Mapping[str, str]], current: Mapping[str, str], label: str) -> None:
    """Raise ``IncompatibleRestartError`` when state written under ``stored`` cannot serve ``current``."""
    if stored is None:
        return
    problems = restart_problems(stored, current)
    if problems:
        safe = "; ".join(f"{part} (not {REFUSED_DIRECTIONS[part]})" if part in REFUSED_DIRECTIONS else part
                         for part in SAFE_CHANGES)
        raise IncompatibleRestartError(
            f"{label}: the checkpoint's state was written by a different operator and cannot be continued:\n  "
            + "\n  ".join(problems) + f"\n(changes a restart may make: {safe})")
