"""Reading raw inputs into (key, timestamp, value, window): the edge where bad elements are caught.

This is the one rule for bad elements, on every path: the element path reads each element here;
the array, columnar and pre-aggregated paths take only rows with a non-null key, time and value and
send every other row here for its reason.  A bad element is never dropped silently: it raises
``BadElementError`` or, when the operator asks for it, goes to the dead-letter output with its
reason.  Bad: a missing or null key (keyed operators) or an unhashable one; a missing, null or
unreadable timestamp, or one at or after ``END_OF_INPUT`` (2255-03-14); a missing, null or NaN
value in the field the accumulation reads, or a null or NaN value (an upstream pane's included)
where the accumulation folds the value itself (``Accumulation.folds_whole_input``); a session gap
read from the element (``SessionWindows(gap=...)``) that is missing, null, not a duration or not
positive; a partition field (``bounded_disorder(partition=...)``) that is missing, null or not
hashable -- a null partition is no partition of its own, as a null key is no key: a source never
gives one (Kafka's partition, a Flink split), so it is a broken derived column, which as a
partition of its own would hold every other partition's watermark back unnoticed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Hashable, Optional, Union

import numpy as np

from .panes import DropReason, PaneRecord, RetractedValue
from .time import END_OF_INPUT, MIN_TIMESTAMP, TimestampError, event_time_in_range, latest_event_time, to_millis
from .windows.base import Window
from .windows.session_windows import GapError, SessionWindows, read_gap

Extractor = Union[str, Callable[[Any], Any], None]


@dataclass(frozen=True, slots=True)
class TimestampedValue:
    """An element with an explicit event time (int ms or datetime), as in Beam's TestStream."""

    value: Any
    timestamp: Any


class BadElementError(ValueError):
    """An element the operator cannot read (``reason`` says why, ``element`` is the element as
    given, ``key`` its key when that much could be read, as a Spark dead letter carries the row's
    key): raised before any state changes, or a dead letter with ``on_bad_element="dead_letter"``."""

    def __init__(self, reason: DropReason, element: Any, detail: str) -> None:
        super().__init__(f"bad element ({reason.value}): {detail}; element={element!r}")
        self.reason = reason
        self.element = element
        self.detail = detail
        self.key: Optional[Hashable] = None


def is_null(value: Any) -> bool:
    """None, NaN or NaT: what a null cell of a Spark row becomes in pandas."""
    return value is None or (isinstance(value, float) and value != value) or type(value).__name__ == "NaTType"


def rejected_row_error(reader: Any, value_column: Optional[str], record: dict,
                       now: Optional[int] = None) -> BadElementError:
    """Why a row an array path set aside (a null key, time or value, or a time out of range at
    processing time ``now``) is a bad element: the reader's error, so every path gives the same reason."""
    try:
        reader.read(record, MIN_TIMESTAMP, now)
    except BadElementError as exc:
        return exc
    raise AssertionError(f"the reader accepted a row with a null key, time or value {value_column!r}, or a time "
                         f"out of range: {record!r}")


def _in_range(element: Any, ts: int, now: Optional[int], max_future_skew: Optional[int]) -> int:
    latest = latest_event_time(now, max_future_skew)
    if event_time_in_range(ts, latest):
        return ts
    if ts >= END_OF_INPUT:
        detail = f"event time {ts} is at or after END_OF_INPUT ({END_OF_INPUT}, 2255-03-14), the end of event time here"
    else:
        assert now is not None  # (without a processing time only END_OF_INPUT and later are out of range)
        detail = (f"event time {ts} is {ts - now} ms ahead of processing time {now}, more than max_future_skew "
                  f"({max_future_skew} ms)")
    raise BadElementError(DropReason.INVALID_TIMESTAMP, element, detail)


def element_json(element: Any, integral_columns: tuple[str, ...] = ()) -> str:
    """A dropped element as valid JSON, the same on every runner and path: nulls (None, NaN, NaT)
    as null, instants (datetimes, Spark timestamps) as epoch ms, as the event-time column is, integers
    of integral columns as integers (not the floats pandas made of a column with a null), a pane (a
    chained stage's element) as its output row, anything else by ``str``."""
    def clean(value: Any, integral: bool = False) -> Any:
        if isinstance(value, PaneRecord):
            row = value.as_dict()
            row["pane_index"], row["timing"] = row.pop("index"), value.timing.value
            return clean(row)
        if isinstance(value, datetime):
            return None if value != value else to_millis(value)  # (pandas' NaT is a datetime unequal to itself)
        if isinstance(value, np.datetime64):
            return None if np.isnat(value) else int(value.astype("datetime64[ms]").astype(np.int64))
        if isinstance(value, dict):
            return {k: clean(v, k in integral_columns) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        if isinstance(value, (float, np.floating)):
            if value != value:
                return None
            if integral and float(value).is_integer():
                return int(value)
            return float(value) if np.isfinite(value) else str(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.bool_):
            return bool(value)
        return value

    return json.dumps(clean(element), default=str, sort_keys=True, allow_nan=False)


@dataclass(frozen=True, slots=True)
class ReadElement:
    key: Optional[Hashable]
    timestamp: int
    value: Any
    window: Optional[Window]
    #: The input partition the element came from (a reader with a partition field only).
    partition: Optional[Hashable] = None


_MISSING = object()


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, _MISSING)
    return getattr(obj, name, _MISSING)


def _extract(extractor: Union[str, Callable[[Any], Any]], payload: Any, element: Any, reason: DropReason,
             what: str) -> Any:
    """What a key, timestamp or gap extractor reads from ``payload``: a callable's result or a
    field; a callable that raises or a missing field makes the element bad for ``reason``."""
    if callable(extractor):
        try:
            return extractor(payload)
        except Exception as exc:  # the user's extractor failed on this element
            raise BadElementError(reason, element, f"{what} extractor raised {exc!r}") from None
    read = _field(payload, extractor)
    if read is _MISSING:
        raise BadElementError(reason, element, f"no {what} field {extractor!r}")
    return read


def readable_field(value: Any, name: str) -> Any:
    """The field ``name`` of ``value``, or None where ``_value_field`` would reject the element (the
    array paths leave such rows to the element path, which does)."""
    read = _field(value, name)
    return None if read is _MISSING or is_null(read) else read


def readable_value(value: Any, extractor: Union[str, dict[str, str]]) -> Any:
    """What a field or record value extractor (``operator.ValueExtractor``) reads from ``value``, or
    None where the element path would reject the element (any field missing or null)."""
    if isinstance(extractor, str):
        return readable_field(value, extractor)
    record = {}
    for name, field in extractor.items():
        read = readable_field(value, field)
        if read is None:
            return None
        record[name] = read
    return record


def _value_field(element: Any, value: Any, name: str) -> Any:
    """The field ``name`` of ``value``: present and not null, or the element is bad."""
    read = _field(value, name)
    if read is _MISSING:
        raise BadElementError(DropReason.INVALID_VALUE, element, f"no value field {name!r}")
    if is_null(read):
        raise BadElementError(DropReason.INVALID_VALUE, element, f"value field {name!r} is null ({read!r})")
    return read


class ElementReader:
    """Applies an operator's key, timestamp and value extractors to one raw element."""

    def __init__(self, *, keyed: bool, key: Extractor, timestamp: Extractor,
                 value: Union[Extractor, dict[str, str]],
                 inherit_windows: bool, payload: Optional[str] = None, value_field: Optional[str] = None,
                 max_future_skew: Optional[int] = None, gap: Extractor = None, whole_value_read: bool = False,
                 partition: Optional[str] = None) -> None:
        #: A field holding the element proper, when key and time sit beside it (Spark's merge rows).
        self.payload = payload
        self.keyed = keyed
        self.key = key
        self.timestamp = timestamp
        self.value = value
        self.inherit_windows = inherit_windows
        #: The field of the value that the accumulation reads (``Sum("amount")``): must be present and not null.
        self.value_field = value_field
        #: The accumulation folds the value itself (``Sum()``): a null one is bad, an upstream pane's too.
        self.whole_value_read = whole_value_read
        #: Elements more than this far ahead of processing time are bad (None: no limit but END_OF_INPUT).
        self.max_future_skew = max_future_skew
        #: Each element's session gap (``SessionWindows(gap=...)``): read into its proto-session, the window slot.
        self.gap = gap
        #: The field naming each element's input partition (``bounded_disorder(partition=...)``).
        self.partition = partition

    def read(self, element: Any, default_timestamp: int, now: Optional[int] = None,
             partition: Optional[Hashable] = None) -> ReadElement:
        """``now``: the processing time against which ``max_future_skew`` is checked; ``partition``:
        the element's partition when its input names it (a test stream's bundle), else the
        partition field is read."""
        payload, ts = element, None
        if isinstance(element, TimestampedValue):
            payload = element.value
            try:
                ts = _in_range(element, to_millis(element.timestamp), now, self.max_future_skew)
            except TimestampError as exc:
                raise BadElementError(DropReason.INVALID_TIMESTAMP, element, str(exc)) from None
        elif isinstance(payload, PaneRecord):
            ts = payload.timestamp
        key = self._key(element, payload)
        try:
            value = self._value(element, payload)
            ts = self._timestamp(element, payload, ts, default_timestamp, now)
            window = self._window(element, payload) if self.inherit_windows else None
            if self.gap is not None:
                window = SessionWindows.proto_session(ts, self._gap(element, payload))
            if self.partition is not None and partition is None:
                partition = self._partition(element, payload)
        except BadElementError as exc:
            exc.key = key
            raise
        return ReadElement(key, ts, value, window, partition)

    def key_of(self, element: Any) -> Optional[Hashable]:
        """Only the key of an element (how Spark routes an upstream pane to a chained stage's group)."""
        return self._key(element, element.value if isinstance(element, TimestampedValue) else element)

    def _key(self, element: Any, payload: Any) -> Optional[Hashable]:
        upstream = isinstance(payload, PaneRecord)
        if not self.keyed:
            key = None
        elif self.key is None:
            if upstream:
                key = payload.key
            elif isinstance(payload, (tuple, list)) and len(payload) == 2:
                key = payload[0]
            else:
                raise BadElementError(DropReason.MISSING_KEY, element,
                                      "a keyed operator without a key extractor takes (key, value) pairs")
        else:
            key = _extract(self.key, payload, element, DropReason.MISSING_KEY, "key")
        if self.keyed:
            if is_null(key):
                raise BadElementError(DropReason.MISSING_KEY, element, f"key is null ({key!r})")
            try:
                hash(key)
            except TypeError:
                raise BadElementError(DropReason.INVALID_KEY, element, f"key {key!r} is not hashable") from None
        return key

    def _value(self, element: Any, payload: Any) -> Any:
        upstream = isinstance(payload, PaneRecord)
        if self.keyed and self.key is not None:
            value = payload  # the extractors read the element (an upstream pane included)
        elif upstream:
            value = payload.value
        elif self.keyed:
            value = payload[1]  # a (key, value) pair: _key checked the shape
        else:
            value = payload
        if self.payload is not None:
            value = _field(value, self.payload)
            if value is _MISSING or value is None:
                raise BadElementError(DropReason.INVALID_VALUE, element, f"no payload field {self.payload!r}")
        if self.value is not None:
            if callable(self.value):
                value = self.value(value)
            elif isinstance(self.value, dict):  # a record of fields (``operator.ValueExtractor``)
                value = {name: _value_field(element, value, field) for name, field in self.value.items()}
            else:
                value = _value_field(element, value, self.value)
        if self.value_field is not None and not upstream:
            _value_field(element, value, self.value_field)
        if self.whole_value_read and (self.value is None or callable(self.value)) and is_null(value):
            what = "the value extractor's result" if callable(self.value) else \
                "the upstream pane's value" if upstream else "value"
            raise BadElementError(DropReason.INVALID_VALUE, element, f"{what} is null ({value!r})")
        if upstream and payload.is_retraction:
            return RetractedValue(value)  # the window folds it out (Accumulation.subtract)
        return value

    def _timestamp(self, element: Any, payload: Any, ts: Optional[int], default: int, now: Optional[int]) -> int:
        if self.timestamp is None:
            return default if ts is None else ts
        raw = _extract(self.timestamp, payload, element, DropReason.MISSING_TIMESTAMP, "timestamp")
        if is_null(raw):
            name = f" {self.timestamp!r}" if isinstance(self.timestamp, str) else ""
            raise BadElementError(DropReason.MISSING_TIMESTAMP, element,
                                  f"timestamp{name} is null ({raw!r}): absent, or not readable as a time by the source")
        try:
            return _in_range(element, to_millis(raw), now, self.max_future_skew)
        except TimestampError as exc:
            raise BadElementError(DropReason.INVALID_TIMESTAMP, element, str(exc)) from None

    def _partition(self, element: Any, payload: Any) -> Hashable:
        assert self.partition is not None  # (read for a reader with a partition field only)
        if isinstance(payload, PaneRecord):  # (a chained stage follows its upstream's watermark)
            raise BadElementError(DropReason.INVALID_PARTITION, element,
                                  "an upstream pane has no partition: only the first stage of a chain computes "
                                  "per-partition watermarks")
        read = _field(payload, self.partition)
        if read is _MISSING:
            raise BadElementError(DropReason.INVALID_PARTITION, element, f"no partition field {self.partition!r}")
        if is_null(read):
            raise BadElementError(DropReason.INVALID_PARTITION, element,
                                  f"partition {self.partition!r} is null ({read!r}): a null partition is a bad "
                                  "element, not a partition of its own")
        try:
            hash(read)
        except TypeError:
            raise BadElementError(DropReason.INVALID_PARTITION, element,
                                  f"partition {self.partition!r} value {read!r} is not hashable") from None
        return read

    def _gap(self, element: Any, payload: Any) -> int:
        gap = self.gap
        assert gap is not None  # (read for a reader with a gap only)
        if callable(gap) and self.payload is not None:  # a callable takes the element proper (Spark's
            payload = _field(payload, self.payload)  # merge rows hold it; a named gap sits beside it)
        raw = _extract(gap, payload, element, DropReason.INVALID_GAP, "gap")
        try:
            return read_gap(raw)
        except GapError as exc:
            name = f" (field {self.gap!r})" if isinstance(self.gap, str) else ""
            raise BadElementError(DropReason.INVALID_GAP, element, f"{exc}{name}") from None

    def _window(self, element: Any, payload: Any) -> Window:
        start, end = _field(payload, "window_start"), _field(payload, "window_end")
        if start is _MISSING or end is _MISSING:
            raise BadElementError(DropReason.MISSING_WINDOW, element,
                                  "an operator without a window option needs records with window_start/window_end")
        try:
            return Window(to_millis(start), to_millis(end))
        except TimestampError as exc:
            raise BadElementError(DropReason.MISSING_WINDOW, element, str(exc)) from None
