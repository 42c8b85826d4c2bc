"""Where an operator's watermark comes from, and the rule that it never moves backwards."""
from __future__ import annotations

from typing import ClassVar, Literal, Optional, Union

from pydantic import Field

from .config import Config, Duration
from .time import MAX_TIMESTAMP, MIN_TIMESTAMP


class UpstreamWatermark(Config):
    """The watermark of the input: Spark's ``withWatermark`` or watermark records of a test stream."""

    kind: Literal["upstream"] = "upstream"

    def candidate(self, upstream: int, processing_time: int, max_event_time: Optional[int]) -> int:
        return upstream


class FixedLagWatermark(Config):
    """Processing time minus a fixed lag: elements older than ``lag`` on arrival are late."""

    _positional: ClassVar[tuple[str, ...]] = ("lag",)
    kind: Literal["fixed_lag"] = "fixed_lag"
    lag: Duration = Field(ge=0, description="lag behind processing time in ms")

    def candidate(self, upstream: int, processing_time: int, max_event_time: Optional[int]) -> int:
        return processing_time - self.lag


class BoundedDisorderWatermark(Config):
    """Largest event time seen minus a lag (Flink's bounded out-of-orderness)."""

    _positional: ClassVar[tuple[str, ...]] = ("max_disorder",)
    kind: Literal["bounded_disorder"] = "bounded_disorder"
    max_disorder: Duration = Field(ge=0, description="how far behind the largest event time seen elements may be, in ms")

    def candidate(self, upstream: int, processing_time: int, max_event_time: Optional[int]) -> int:
        if max_event_time is None:
            return MIN_TIMESTAMP
        return max_event_time - self.max_disorder


WatermarkPolicy = Union[UpstreamWatermark, FixedLagWatermark, BoundedDisorderWatermark]


def upstream_watermark() -> UpstreamWatermark:
    """The watermark the input carries (the default): a test stream's watermark records locally,
    the DataFrame's own ``withWatermark`` on Spark."""
    return UpstreamWatermark()


def fixed_watermark(lag: int) -> FixedLagWatermark:
    """Processing time minus ``lag`` ms: windows close on the clock, whatever the data's times
    (on Spark, the batch clock; the query runs in processing-time mode)."""
    return FixedLagWatermark(lag=lag)


def bounded_disorder(max_disorder: int) -> BoundedDisorderWatermark:
    """The largest event time seen minus ``max_disorder`` ms: elements may arrive that much out of
    order and still be on time (on Spark, the runner calls ``withWatermark`` with this delay)."""
    return BoundedDisorderWatermark(max_disorder=max_disorder)


class WatermarkTracker:
    """Keeps the operator's watermark monotonic and remembers what its policy needs."""

    __slots__ = ("policy", "current", "upstream", "max_event_time")

    def __init__(self, policy: WatermarkPolicy, current: int = MIN_TIMESTAMP) -> None:
        self.policy = policy
        self.current = current
        self.upstream = MIN_TIMESTAMP
        self.max_event_time: Optional[int] = None

    def observe_event_time(self, ts: int) -> None:
        if self.max_event_time is None or ts > self.max_event_time:
            self.max_event_time = ts

    def observe_upstream(self, watermark: int) -> None:
        self.upstream = max(self.upstream, watermark)

    def compute(self, processing_time: int) -> int:
        """Advance (never retreat) to what the policy allows now; end of input always wins."""
        if self.upstream >= MAX_TIMESTAMP:
            candidate = MAX_TIMESTAMP
        else:
            candidate = self.policy.candidate(self.upstream, processing_time, self.max_event_time)
        candidate = max(MIN_TIMESTAMP, min(MAX_TIMESTAMP, candidate))
        if candidate > self.current:
            self.current = candidate
        return self.current


class TwoInputWatermarkTracker:
    """The watermark of a merge: the minimum over its inputs that are not idle.

    Each input keeps its own watermark (its own upstream watermark or its own largest event time).
    An input that has sent nothing holds the watermark back, as in Spark, Flink and Beam, until it is
    idle: marked idle explicitly, or silent for ``idle_timeout`` ms of processing time (Flink's
    ``withIdleness``).  An idle input stops counting until its next element; when every input is
    idle the watermark is the largest of theirs (as Flink's watermark valve does).  It never moves
    backwards, so an input waking up behind it sends late elements.
    """

    def __init__(self, policy: WatermarkPolicy, sides: tuple[str, ...], idle_timeout: Optional[int] = None,
                 processing_time: int = 0) -> None:
        self.sides = {side: WatermarkTracker(policy) for side in sides}
        self.idle_timeout = idle_timeout
        self.last_activity = {side: processing_time for side in sides}
        self.marked_idle: set[str] = set()
        self.current = MIN_TIMESTAMP

    def observe_event_time(self, side: str, ts: int, processing_time: int) -> None:
        self.sides[side].observe_event_time(ts)
        self.last_activity[side] = processing_time
        self.marked_idle.discard(side)

    def observe_upstream(self, side: str, watermark: int, processing_time: int) -> None:
        self.sides[side].observe_upstream(watermark)
        self.last_activity[side] = processing_time
        self.marked_idle.discard(side)

    def mark_idle(self, side: str) -> None:
        self.marked_idle.add(side)

    def is_idle(self, side: str, processing_time: int) -> bool:
        if side in self.marked_idle:
            return True
        return self.idle_timeout is not None and processing_time - self.last_activity[side] >= self.idle_timeout

    def compute(self, processing_time: int) -> int:
        marks = {side: tracker.compute(processing_time) for side, tracker in self.sides.items()}
        active = [mark for side, mark in marks.items() if not self.is_idle(side, processing_time)]
        candidate = min(active) if active else max(marks.values())
        if candidate > self.current:
            self.current = candidate
        return self.current
