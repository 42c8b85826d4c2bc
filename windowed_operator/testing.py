"""A scripted input for the local runner, shaped like Beam's TestStream."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from .elements import TimestampedValue
from .time import MAX_TIMESTAMP, to_duration_millis, to_millis

__all__ = ["TestStream", "TimestampedValue", "ElementsEvent", "WatermarkEvent", "ProcessingTimeEvent"]


@dataclass(frozen=True)
class ElementsEvent:
    elements: tuple


@dataclass(frozen=True)
class WatermarkEvent:
    watermark: int


@dataclass(frozen=True)
class ProcessingTimeEvent:
    advance_by: int


StreamEvent = Union[ElementsEvent, WatermarkEvent, ProcessingTimeEvent]


class TestStream:
    """Elements (one bundle per ``add_elements`` call), watermark advances and processing-time advances.

    Elements that are not ``TimestampedValue`` take the current watermark as their timestamp unless the
    operator has a timestamp extractor, as in Beam.
    """

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []

    def add_elements(self, *elements: Any) -> "TestStream":
        if len(elements) == 1 and isinstance(elements[0], list):
            elements = tuple(elements[0])
        self.events.append(ElementsEvent(tuple(elements)))
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
