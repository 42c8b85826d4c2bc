"""What an operator emits: pane records, dropped elements, and the vocabulary describing them."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any, Hashable, Mapping, Optional, Sequence, Union

import numpy as np

from .windows.base import Window


class Timing(str, Enum):
    """When a pane fired relative to the watermark passing the window's end (Beam's PaneInfo.Timing)."""

    EARLY = "EARLY"
    ON_TIME = "ON_TIME"
    LATE = "LATE"


class TimestampCombiner(str, Enum):
    """Which timestamp a pane carries: the window's max timestamp, or the earliest/latest input of the pane."""

    END_OF_WINDOW = "end_of_window"
    EARLIEST = "earliest"
    LATEST = "latest"


class DropReason(str, Enum):
    """Why an element did not reach any window's aggregate."""

    EXPIRED = "expired"  # every window of the element has expired (``time_rules.is_expired``)
    CLOSED_WINDOW = "closed_window"  # the window's trigger has finished (Beam's DROPPED_DUE_TO_CLOSED_WINDOW)
    MISSING_TIMESTAMP = "missing_timestamp"
    INVALID_TIMESTAMP = "invalid_timestamp"
    MISSING_KEY = "missing_key"
    INVALID_KEY = "invalid_key"
    MISSING_WINDOW = "missing_window"
    INVALID_VALUE = "invalid_value"
    INVALID_GAP = "invalid_gap"  # a session gap read from the element that is null, not a duration or not positive
    INVALID_PARTITION = "invalid_partition"  # a partition field (``bounded_disorder(partition=)``) missing, null, unhashable


#: The columns of an operator's output rows on Spark and in ``run --local``'s sinks, in order
#: (``key`` only for keyed operators): the one statement of the output schema.
OUTPUT_COLUMNS = ["key", "window_start", "window_end", "value", "timing", "pane_index", "is_first", "is_last",
                  "is_retraction", "timestamp"]
#: Extra columns when the operator has a late-data or dead-letter output.
SIDE_OUTPUT_COLUMNS = ["record_type", "reason", "element", "element_timestamp"]
#: Extra columns with ``fired_by=True``: why each pane fired, the input watermark then (a time) and
#: the partition holding it back (``engine.fired_by``).
FIRING_COLUMNS = ["fired_by", "firing_watermark", "held_back_by"]
#: One more on a merge's (and on a chain's that starts with one): the input a side row came on.
INPUT_COLUMN = "input"
#: The columns of an operator's watermark rows on Spark (``windowed_operator.spark.with_watermark``):
#: the watermark a key group ran a batch at (epoch ms) and, under ``partition=``, the partition
#: holding it back; null on every other row, and every other column null on them.  Table sinks read
#: them (``sinks.completeness``).
WATERMARK_ROW_COLUMN = "__wo_watermark"
HELD_BY_ROW_COLUMN = "__wo_held_by"


@dataclass(frozen=True, slots=True)
class RetractedValue:
    """What a downstream stage folds for an upstream retraction: ``value`` (the output being undone,
    as the stage's extractors read it) comes out of the window's accumulator with
    ``Accumulation.subtract``, so a downstream Sum, Count or Mean stays exact."""

    value: Any


@dataclass(frozen=True, slots=True)
class Firing:
    """Why a pane fired (``fired_by``: a trigger clause or an event, ``engine.fired_by`` names them),
    the input watermark then (epoch ms), and under a per-partition watermark the partition holding
    it back (None: none)."""

    fired_by: str
    watermark: int
    held_back_by: Optional[str] = None


@dataclass(frozen=True, slots=True)
class PaneRecord:
    """One output row: a pane (or the retraction of an earlier pane) of one window of one key."""

    key: Optional[Hashable]
    window_start: int
    window_end: int
    value: Any
    timing: Timing
    index: int
    is_first: bool
    is_last: bool
    is_retraction: bool
    timestamp: int
    #: Why it fired, with the watermark then (``fired_by=True``; None otherwise: ``engine.fired_by``).
    firing: Optional[Firing] = None

    @property
    def window(self) -> Window:
        """The pane's window as a ``Window``."""
        return Window(self.window_start, self.window_end)

    @property
    def pane_index(self) -> int:
        """``index`` under the Spark output's column name (``pane_index``), so code reading either
        runner's panes can use one name."""
        return self.index

    def as_dict(self) -> dict:
        """The pane's fields as a dict (``key``, ``window_start``, ``window_end``, ``value``, ``timing``,
        ...), as a next stage reads them (``firing`` left out: Spark hands the next stage the pane
        columns only)."""
        return {name: getattr(self, name) for name in self.__slots__ if name != "firing"}


class WindowOverflowError(ArithmeticError):
    """An integer window value that does not fit a signed 64-bit integer (Spark's bigint): an error on
    every path, never a wrapped number."""

    def __init__(self, operator: str, column: Optional[str], key: Optional[Hashable], window: Window,
                 value: Any) -> None:
        over = f"column {column!r}" if column else "its input"
        super().__init__(
            f"{operator}: the value of window [{window.start}, {window.end}) of key {key!r} over {over} is {value}, "
            "which does not fit a 64-bit integer (Spark's bigint); sum a smaller unit, or cast the column to "
            "double to sum it as a double")
        self.key = key
        self.window = window
        self.value = value


@dataclass(frozen=True, slots=True)
class DroppedElement:
    """An element that was counted as dropped, sent to the late-data or dead-letter output.

    ``element`` is the element as it arrived (a one-input operator's row, a merge input's row),
    not the value read from it; ``input`` names a merge's input it came on (``'left'`` or
    ``'right'``; None for a one-input operator's)."""

    reason: DropReason
    element: Any
    key: Optional[Hashable] = None
    timestamp: Optional[int] = None
    watermark: Optional[int] = None
    detail: str = ""
    input: Optional[str] = None


@dataclass(frozen=True, slots=True)
class InputRow:
    """A merge's element as it arrived, which the core reports when it drops one (its ``origins``):
    the input it came on and its row; ``of_input`` makes it the dropped element's ``input``."""

    input: str
    row: Any


def of_input(dropped: DroppedElement) -> DroppedElement:
    """``dropped`` with a merge's ``InputRow`` taken apart into its row and its input."""
    origin = dropped.element
    if isinstance(origin, InputRow):
        return dataclasses.replace(dropped, element=origin.row, input=origin.input)
    return dropped


# -- panes rebuilt from rows: what a chained stage reads (the local chain and the Spark runner alike) --

def _plain(value: Any) -> Any:
    """A cell as the local runner's panes hold it: arrays (Spark's arrays in pandas) as lists."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def pane_from_row(row: dict, upstream: Any) -> PaneRecord:
    """An upstream stage's output row (times in epoch ms) as the pane the local chain would hand the
    next stage: its value plain Python, a retraction carrying the output it undoes (``as_consumed``)."""
    return panes_from_columns({name: [value] for name, value in row.items()}, upstream)[0]


_TIMINGS = {timing.value: timing for timing in Timing}


def panes_from_columns(columns: Mapping[str, Union[Sequence[Any], np.ndarray]], upstream: Any) -> list[PaneRecord]:
    """``pane_from_row`` for many rows at once: each column converted once (numpy scalars to Python
    ones by ``tolist``), the panes built from plain values."""
    def plain(name: str) -> list:
        column = columns[name]
        return column.tolist() if isinstance(column, np.ndarray) else list(column)

    n = len(columns["window_start"])
    keys = [_plain(k) for k in plain("key")] if upstream.keyed else [None] * n
    values = [_plain(v) for v in plain("value")]
    retractions = [bool(r) for r in plain("is_retraction")]
    panes = [PaneRecord(key=key, window_start=int(start), window_end=int(end), value=value, timing=_TIMINGS[timing],
                        index=int(index), is_first=bool(first), is_last=bool(last), is_retraction=retraction,
                        timestamp=int(timestamp))
             for key, start, end, value, timing, index, first, last, retraction, timestamp in zip(
                 keys, plain("window_start"), plain("window_end"), values, plain("timing"), plain("pane_index"),
                 plain("is_first"), plain("is_last"), retractions, plain("timestamp"))]
    if any(retractions):
        undone = iter(as_consumed([p for p in panes if p.is_retraction], upstream))
        panes = [next(undone) if p.is_retraction else p for p in panes]
    return panes


def as_consumed(panes: list[PaneRecord], upstream: Any) -> list[PaneRecord]:
    """``upstream``'s panes as the next stage reads them: a retraction carries the output it undoes
    (its value is ``get_retraction(output)``, and ``get_retraction`` is its own inverse: a negation,
    or the identity), so the next stage's extractors read the same fields as for the pane it retracts."""
    undo = upstream.core_accumulation().get_retraction
    return [dataclasses.replace(p, value=undo(p.value)) if p.is_retraction else p for p in panes]
