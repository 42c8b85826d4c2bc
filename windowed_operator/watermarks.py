"""Where an operator's watermark comes from, the rule that it never moves backwards, and the one
rule for quiet streams (``idle_advanced``)."""
from __future__ import annotations

from typing import Any, ClassVar, Literal, Optional, Union

from pydantic import Field

from .config import Config, Duration
from .time import END_OF_INPUT, MAX_TIMESTAMP, MIN_TIMESTAMP

_IDLE_TIMEOUT = Field(default=None, gt=0, description="processing time (ms) without any input after which the "
                                                      "watermark advances with processing time")


def idle_advanced(event_watermark: int, last_input: Optional[int], idle_timeout: Optional[int], now: int) -> int:
    """The watermark of a stream that may go quiet: its event-time watermark while input arrives;
    once no input at all has come for ``idle_timeout`` ms of processing time, that watermark
    advancing at the pace of processing time from where event time left it,
    ``event_watermark + (now - (last_input + idle_timeout))``, so that the last windows of a
    stream that stopped close.  When input resumes the event-time watermark rules again; as a
    watermark never moves back, what arrives behind the advanced one is late (allowed lateness,
    late-data output), never lost silently.  The advance stops short of ``END_OF_INPUT``: only the
    end of input closes the global window."""
    if idle_timeout is None or last_input is None or event_watermark <= MIN_TIMESTAMP:
        return event_watermark
    quiet_since = last_input + idle_timeout
    if now <= quiet_since:
        return event_watermark
    return max(event_watermark, min(event_watermark + (now - quiet_since), END_OF_INPUT - 1))


class UpstreamWatermark(Config):
    """The watermark of the input: Spark's ``withWatermark`` or watermark records of a test stream.
    ``idle_timeout``: see ``idle_advanced``."""

    kind: Literal["upstream"] = "upstream"
    idle_timeout: Optional[Duration] = _IDLE_TIMEOUT

    def candidate(self, upstream: int, processing_time: int, max_event_time: Optional[int]) -> int:
        """The watermark this policy proposes: the input's own (``upstream``).

        The runner calls it at each step with the upstream watermark, the processing time and the
        largest event time seen; the operator's watermark never moves back from what it had.
        """
        return upstream


class FixedLagWatermark(Config):
    """Processing time minus a fixed lag: elements older than ``lag`` on arrival are late."""

    _positional: ClassVar[tuple[str, ...]] = ("lag",)
    kind: Literal["fixed_lag"] = "fixed_lag"
    lag: Duration = Field(ge=0, description="lag behind processing time in ms")

    def candidate(self, upstream: int, processing_time: int, max_event_time: Optional[int]) -> int:
        """The watermark this policy proposes: processing time minus ``lag``."""
        return processing_time - self.lag


class BoundedDisorderWatermark(Config):
    """Largest event time seen minus a lag (Flink's bounded out-of-orderness).  ``idle_timeout``:
    see ``idle_advanced``."""

    _positional: ClassVar[tuple[str, ...]] = ("max_disorder",)
    kind: Literal["bounded_disorder"] = "bounded_disorder"
    max_disorder: Duration = Field(ge=0, description="how far behind the largest event time seen elements may be, in ms")
    idle_timeout: Optional[Duration] = _IDLE_TIMEOUT

    def candidate(self, upstream: int, processing_time: int, max_event_time: Optional[int]) -> int:
        """The watermark this policy proposes: the largest event time seen minus ``max_disorder``
        (the smallest timestamp before any element).
        """
        if max_event_time is None:
            return MIN_TIMESTAMP
        return max_event_time - self.max_disorder


WatermarkPolicy = Union[UpstreamWatermark, FixedLagWatermark, BoundedDisorderWatermark]


def upstream_watermark(idle_timeout: Optional[int] = None) -> UpstreamWatermark:
    """The watermark the input carries (the default): a test stream's watermark records locally,
    the DataFrame's own ``withWatermark`` on Spark.  ``idle_timeout``: after that much processing
    time without input, the watermark advances with processing time (``idle_advanced``)."""
    return UpstreamWatermark(idle_timeout=idle_timeout)


def fixed_watermark(lag: int) -> FixedLagWatermark:
    """Processing time minus ``lag`` ms: windows close on the clock, whatever the data's times
    (on Spark, the batch clock; the query runs in processing-time mode)."""
    return FixedLagWatermark(lag=lag)


def bounded_disorder(max_disorder: int, idle_timeout: Optional[int] = None) -> BoundedDisorderWatermark:
    """The largest event time seen minus ``max_disorder`` ms: elements may arrive that much out of
    order and still be on time (on Spark, the runner calls ``withWatermark`` with this delay).
    ``idle_timeout``: after that much processing time without input, the watermark advances with
    processing time (``idle_advanced``)."""
    return BoundedDisorderWatermark(max_disorder=max_disorder, idle_timeout=idle_timeout)


class WatermarkTracker:
    """Keeps the operator's watermark monotonic and remembers what its policy needs."""

    __slots__ = ("policy", "current", "upstream", "max_event_time", "last_input")

    def __init__(self, policy: WatermarkPolicy, current: int = MIN_TIMESTAMP) -> None:
        self.policy = policy
        self.current = current
        self.upstream = MIN_TIMESTAMP
        self.max_event_time: Optional[int] = None
        #: Processing time of the last input (an element, or an upstream watermark that moved).
        self.last_input: Optional[int] = None

    def observe_event_time(self, ts: int) -> None:
        if self.max_event_time is None or ts > self.max_event_time:
            self.max_event_time = ts

    def observe_upstream(self, watermark: int, processing_time: Optional[int] = None) -> None:
        if watermark > self.upstream and processing_time is not None:
            self.note_input(processing_time)
        self.upstream = max(self.upstream, watermark)

    def note_input(self, processing_time: int) -> None:
        """Input arrived (any element, good, late or bad): the stream is not quiet."""
        self.last_input = processing_time if self.last_input is None else max(self.last_input, processing_time)

    def compute(self, processing_time: int) -> int:
        """Advance (never retreat) to what the policy allows now; end of input always wins."""
        if self.upstream >= MAX_TIMESTAMP:
            candidate = MAX_TIMESTAMP
        else:
            candidate = self.policy.candidate(self.upstream, processing_time, self.max_event_time)
            candidate = idle_advanced(max(MIN_TIMESTAMP, candidate), self.last_input,
                                      getattr(self.policy, "idle_timeout", None), processing_time)
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
        self.sides[side].note_input(processing_time)
        self.last_activity[side] = processing_time
        self.marked_idle.discard(side)

    def note_input(self, side: str, processing_time: int) -> None:
        self.sides[side].note_input(processing_time)

    def observe_upstream(self, side: str, watermark: int, processing_time: int) -> None:
        self.sides[side].observe_upstream(watermark, processing_time)
        self.last_activity[side] = processing_time
        self.marked_idle.discard(side)

    def mark_idle(self, side: str) -> None:
        self.marked_idle.add(side)

    def is_idle(self, side: str, processing_time: int) -> bool:
        if side in self.marked_idle:
            return True
        return input_is_idle(self.last_activity[side], self.idle_timeout, processing_time)

    def compute(self, processing_time: int) -> int:
        marks = {side: tracker.compute(processing_time) for side, tracker in self.sides.items()}
        candidate = two_input_watermark(marks, {side: self.is_idle(side, processing_time) for side in marks})
        if candidate > self.current:
            self.current = candidate
        return self.current


def input_is_idle(last_activity: int, idle_timeout: Optional[int], processing_time: int) -> bool:
    """A merge's input stops holding the watermark back after ``idle_timeout`` ms without elements."""
    return idle_timeout is not None and processing_time - last_activity >= idle_timeout


def two_input_watermark(marks: dict[str, int], idle: dict[str, bool]) -> int:
    """The minimum over the inputs that are not idle; the largest when all are (Flink's valve)."""
    active = [mark for side, mark in marks.items() if not idle[side]]
    return min(active) if active else max(marks.values())


def needs_processing_time(trigger: Any, watermark: Any, idle_timeout: Optional[int] = None) -> bool:
    """Whether an operator needs processing time to pass (a trigger firing on it, a fixed-lag
    watermark, an idle timeout): on Spark its query then runs in ProcessingTime mode, where time
    passes only in micro-batches, so it needs a ``processingTime`` trigger to see quiet time."""
    return (trigger.to_trigger().uses_processing_time() or isinstance(watermark, FixedLagWatermark)
            or getattr(watermark, "idle_timeout", None) is not None or idle_timeout is not None)
