"""Readers that only checkpoints of earlier state versions need, each tagged with the versions it serves.

The hot path reads today's forms and calls in here only when one cheap test (a record that is a dict,
a shard text that starts with ``[[``) says the stored form is an older one; each reader returns
today's form, which the next write stores.  ``READERS`` lists them with their versions (the docs'
compatibility promise is tested against it): a reader goes when no version it serves is in
``layouts.VERSIONS_READ`` any more.

Not here: the pre-version-6 detection (the processor declares the pickled ``windowed_operator_state``
value only to refuse such a checkpoint, ``spark.state_schemas``), which Spark needs declared in every
checkpoint that has it; version 7's window-log parts (every accumulator by value), read by the same
code as version 8's non-join parts (``window_log.part_accs``).
"""
from __future__ import annotations

import json
from typing import Any, Callable, TypeVar

from triggers.base import TimeDomain, TriggerContext

from ..engine.columnar_triggers import NOT_SET
from ..time import MIN_TIMESTAMP

_F = TypeVar("_F", bound=Callable[..., Any])
#: Every reader of an earlier version, by name: the state versions it serves.
READERS: dict[str, tuple[str, ...]] = {}


def serves(*versions: str) -> Callable[[_F], _F]:
    """Tag a reader with the state versions whose checkpoints need it (``READERS``)."""
    def tag(reader: _F) -> _F:
        READERS[reader.__name__] = versions
        return reader
    return tag


@serves("6")
def key_record_fields(record: dict) -> tuple[Any, list]:
    """A key's record as ``{"state": ..., "due": [...]}`` (version 7 stores ``[due, due, state]``)."""
    return record["state"], record["due"]


@serves("6")
def named_columns(data: dict, panes: str) -> dict[str, Any]:
    """A key's pane rows or session/window rows stored as named fields (version 7 stores them by
    position), which left out default columns (filled by the caller) and, before sessions took count
    triggers, the trigger's (``trigger_columns``)."""
    if "ends" not in data:
        return {"kind": panes, "late": [], **data}
    columns = {"kind": data.get("rows", "sessions"), **data}
    if "late" not in columns:
        columns.update(trigger_columns(columns))
    return columns


@serves("6")
def trigger_columns(data: dict) -> dict:
    """The count trigger's columns of session rows written before sessions took count triggers
    (the default trigger only): its end-of-window timer was pending exactly while ``hold`` was set,
    which is the trigger's phase before the ON_TIME pane; no count; never finished."""
    return {"late": [not hold for hold in data["hold"]], "count": [0] * len(data["hold"]),
            "closed": [False] * len(data["hold"])}


@serves("6")
def windows_as_rows(codec: Any, data: dict) -> Any:
    """A key's session or window rows from the object path's record (``{"windows": [...]}``, written
    while these operators ran element by element): its windows' bookkeeping, and the trigger's phase,
    count and processing-time firing from its state (the end-of-window timer is pending exactly before
    the ON_TIME pane: ``columnar_triggers``).  ``codec``: the ``records.RowsCodec`` reading it."""
    windows = sorted(codec.values.from_data(data).windows.items())
    out = codec.record(acc=[[] for _ in range(codec.form.width)])
    for window, ws in windows:
        late = not ws.timer_times(TimeDomain.WATERMARK.value)
        # (``AfterWatermark``'s early or late ``Repeatedly``, read where its ``AfterCount`` keeps its count
        # or its ``AfterProcessingTime`` its due time)
        phase = TriggerContext(window, ws.trigger_state, ws.timers, MIN_TIMESTAMP, 0).nested(
            "late" if late else "early").nested(0)
        fire_at = phase.get("fire_at")
        row = {"starts": window.start, "ends": window.end, "pending": ws.pending, "hold": ws.on_time_hold,
               "nonspeculative": ws.nonspeculative_index, "index": ws.pane_index, "late": late,
               "count": phase.get("count", 0), "fire_at": NOT_SET if fire_at is None else fire_at,
               "closed": ws.closed}
        for name in codec.columns:
            getattr(out, name).append(row[name])
        for column, value in zip(out.acc, codec.form.columns_of(ws.acc) if not ws.closed
                                 else [0] * codec.form.width):
            column.append(value)
        out.last.append(ws.last_output)
    return out


@serves("6")
def shard_pairs(text: str, encode: Callable[[Any], str]) -> dict[str, str]:
    """A key shard stored as a JSON array of [key, record] pairs (written before lines, both within
    version 6), as {key JSON: record text}; ``encode``: the key's JSON as shards name it."""
    return {encode(tag): record for tag, record in json.loads(text)}
