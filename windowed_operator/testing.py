"""A scripted input for the local runner, shaped like Beam's TestStream."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Optional, Union

from .elements import TimestampedValue
from .time import MAX_TIMESTAMP, to_duration_millis, to_millis

__all__ = ["TestStream", "TwoInputTestStream", "TimestampedValue", "ElementsEvent", "WatermarkEvent",
           "ProcessingTimeEvent", "IdleEvent", "replay"]


@dataclass(frozen=True)
class ElementsEvent:
    elements: tuple
    #: Which input of a merge operator gets them (None: the only input).
    side: Optional[str] = None
    #: The input partition they all came from (``bounded_disorder(partition=...)``; None: each
    #: element's partition field).
    partition: Optional[Hashable] = None


@dataclass(frozen=True)
class WatermarkEvent:
    watermark: int
    side: Optional[str] = None


@dataclass(frozen=True)
class ProcessingTimeEvent:
    advance_by: int


@dataclass(frozen=True)
class IdleEvent:
    side: str


StreamEvent = Union[ElementsEvent, WatermarkEvent, ProcessingTimeEvent, IdleEvent]


def _elements(elements: tuple) -> tuple:
    if len(elements) == 1 and isinstance(elements[0], list):
        return tuple(elements[0])
    return elements


def replay(events: list[StreamEvent], target: Any) -> list:
    """Feed a test stream's events to a runner (one-input, merge or chain); returns what it emitted."""
    emitted: list = []
    for event in events:
        if isinstance(event, ElementsEvent) and event.side == "both":
            emitted.extend(target.add_elements_from_both(*event.elements))
        elif isinstance(event, ElementsEvent):
            side = () if event.side is None else (event.side,)
            named = {} if event.partition is None else {"partition": event.partition}
            emitted.extend(target.add_elements(*side, *event.elements, **named))
        elif isinstance(event, WatermarkEvent):
            side = () if event.side is None else (event.side,)
            emitted.extend(target.advance_watermark_to(*side, event.watermark))
        elif isinstance(event, ProcessingTimeEvent):
            emitted.extend(target.advance_processing_time(event.advance_by))
        elif isinstance(event, IdleEvent):
            emitted.extend(target.mark_idle(event.side))
        else:  # pragma: no cover - the streams only make these kinds
            raise TypeError(f"unknown test stream event {event!r}")
    return emitted


class TestStream:
    """Elements (one bundle per ``add_elements`` call), watermark advances and processing-time advances.

    Elements that are not ``TimestampedValue`` take the current watermark as their timestamp unless the
    operator has a timestamp extractor, as in Beam.  Under ``bounded_disorder(..., partition=...)``
    an element's partition is its partition field, or the one its bundle names
    (``add_elements(..., partition="p1")``: everything a partition delivered at once).
    """

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []

    def add_elements(self, *elements: Any, partition: Optional[Hashable] = None) -> "TestStream":
        self.events.append(ElementsEvent(_elements(elements), partition=partition))
        return self

    def advance_watermark_to(self, watermark: Any) -> "TestStream":
        self.events.append(WatermarkEvent(to_millis(watermark)))
        return self

    def advance_processing_time(self, advance_by: Any) -> "TestStream":
        self.events.append(ProcessingTimeEvent(to_duration_millis(advance_by)))
        return self

    def advance_watermark_to_infinity(self) -> "TestStream":
        self.events.append(WatermarkEvent(MAX_TIMESTAMP))
        return self


class TwoInputTestStream:
    """The test stream of a merge operator: elements and watermarks per input (``"left"``/``"right"``),
    idle marks per input, and processing-time advances shared by both."""

    __test__ = False

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []

    @staticmethod
    def _side(side: str) -> str:
        if side not in ("left", "right"):
            raise ValueError(f"side must be 'left' or 'right', got {side!r}")
        return side

    def add_elements(self, side: str, *elements: Any, partition: Optional[Hashable] = None) -> "TwoInputTestStream":
        """One bundle of one input; ``partition``: the partition of that input it came from."""
        self.events.append(ElementsEvent(_elements(elements), self._side(side), partition))
        return self

    def add_elements_from_both(self, left: list, right: list) -> "TwoInputTestStream":
        """One bundle with elements of both inputs (one Spark micro-batch of both)."""
        self.events.append(ElementsEvent((tuple(left), tuple(right)), "both"))
        return self

    def advance_watermark_to(self, side: str, watermark: Any) -> "TwoInputTestStream":
        self.events.append(WatermarkEvent(to_millis(watermark), self._side(side)))
        return self

    def mark_idle(self, side: str) -> "TwoInputTestStream":
        self.events.append(IdleEvent(self._side(side)))
        return self

    def advance_processing_time(self, advance_by: Any) -> "TwoInputTestStream":
        self.events.append(ProcessingTimeEvent(to_duration_millis(advance_by)))
        return self

    def advance_watermark_to_infinity(self) -> "TwoInputTestStream":
        for side in ("left", "right"):
            self.events.append(WatermarkEvent(MAX_TIMESTAMP, side))
        return self
