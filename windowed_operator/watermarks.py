"""Where an operator's watermark comes from, the rule that it never moves backwards, the one rule
for quiet streams (``idle_advanced``) and the one rule for partitioned inputs
(``PartitionWatermarks``)."""
from __future__ import annotations

from typing import Any, ClassVar, Hashable, Iterable, Literal, Mapping, Optional, TypeVar, Union

from pydantic import Field

from .config import Config, Duration
from .time import END_OF_INPUT, MAX_TIMESTAMP, MIN_TIMESTAMP

#: A merge's input name or a partition value.
_Input = TypeVar("_Input", bound=Hashable)

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
    see ``idle_advanced``.  ``partition``: the field (column) naming each element's input
    partition; the watermark is then computed per partition (``PartitionWatermarks``)."""

    _positional: ClassVar[tuple[str, ...]] = ("max_disorder",)
    kind: Literal["bounded_disorder"] = "bounded_disorder"
    max_disorder: Duration = Field(ge=0, description="how far behind the largest event time seen elements may be, in ms")
    idle_timeout: Optional[Duration] = _IDLE_TIMEOUT
    partition: Optional[str] = Field(
        default=None, min_length=1, description="field (column) naming each element's input partition: the watermark "
                                                "is the minimum over partitions that are not idle (PartitionWatermarks)")

    def __repr_args__(self) -> Any:
        """Without ``partition`` when it is not given: an operator's fingerprint is the ``repr`` of its
        watermark, and a checkpoint written before partitions existed must find the same text."""
        return [(name, value) for name, value in super().__repr_args__()
                if not (name == "partition" and value is None)]

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


def bounded_disorder(max_disorder: int, idle_timeout: Optional[int] = None,
                     partition: Optional[str] = None) -> BoundedDisorderWatermark:
    """The largest event time seen minus ``max_disorder`` ms: elements may arrive that much out of
    order and still be on time (on Spark, the runner calls ``withWatermark`` with this delay).
    ``idle_timeout``: after that much processing time without input, the watermark advances with
    processing time (``idle_advanced``).  ``partition``: the field (column) naming each element's
    input partition (Kafka's ``partition``, or one the user derives): the watermark is then the
    minimum over the partitions of their own, so a lagging partition is not dropped as late, and
    ``idle_timeout`` also leaves a partition quiet that long out of the minimum
    (``PartitionWatermarks``; on Spark the operator computes it from heartbeats carrying each
    partition's largest event time to every key group, see ``spark.scan.heartbeat``)."""
    return BoundedDisorderWatermark(max_disorder=max_disorder, idle_timeout=idle_timeout, partition=partition)


def partition_of(policy: Any) -> Optional[str]:
    """The field naming each element's partition under ``policy`` (None: one watermark for the input)."""
    return getattr(policy, "partition", None)


class PartitionWatermarks:
    """The event-time watermark of one input whose elements come from partitions (``bounded_disorder(
    max_disorder, idle_timeout, partition=...)``): pure, and kept as plain data (``snapshot``).

    This is the one statement of the rule:

    - each partition has its own watermark, the largest event time seen in it minus
      ``max_disorder``; the input's event-time watermark is the minimum over the partitions that are
      not idle, so a lagging partition holds it back instead of having its elements dropped as late;
    - a partition is idle once it has sent nothing for ``idle_timeout`` ms of processing time
      (``input_is_idle``: at exactly the timeout it is idle), and counts again from its next element;
      without ``idle_timeout`` no partition is ever idle (one that stops holds the watermark until the
      end of input, as in Flink without ``withIdleness``);
    - when every partition is idle the input is quiet: its event-time watermark is the largest of the
      partitions' (Flink's watermark valve; it equals the watermark without ``partition=``) and
      ``idle_advanced`` moves it on with processing time, as for any quiet stream;
    - the watermark never moves back (``compute``): a partition first seen late -- in a new run, or after a
      restart, where it starts from the restored watermark -- or one that rejoins after being idle,
      joins at the current watermark: the watermark waits there until that partition's own passes it,
      and only what the partition sends behind the current watermark is late.  (Flink's valve lets a
      rejoining split chase the others instead, which drops its backlog: the case ``partition=`` exists for.)
    - before any element the watermark is the smallest timestamp.

    A partition is a value of the named field; a missing or null value makes the element bad
    (``elements``: ``invalid_partition``), as a null key or timestamp does.
    """

    __slots__ = ("max_disorder", "idle_timeout", "partitions", "current")

    def __init__(self, max_disorder: int, idle_timeout: Optional[int] = None, current: int = MIN_TIMESTAMP) -> None:
        self.max_disorder = max_disorder
        self.idle_timeout = idle_timeout
        #: partition -> [largest event time seen in it, processing time of its last element], first seen first.
        self.partitions: dict[Hashable, list[int]] = {}
        #: The watermark so far (never moves back).
        self.current = current

    def observe(self, partition: Hashable, event_time: int, processing_time: int) -> None:
        """An element of ``partition`` (on time, late or behind the watermark alike) at ``processing_time``."""
        seen = self.partitions.get(partition)
        if seen is None:
            self.partitions[partition] = [event_time, processing_time]
        else:
            seen[0] = max(seen[0], event_time)
            seen[1] = max(seen[1], processing_time)

    def touch(self, partition: Hashable, processing_time: int) -> None:
        """``partition`` (once seen) brings elements at ``processing_time``: it is not idle then, its
        largest event time unchanged (its elements are observed later)."""
        seen = self.partitions.get(partition)
        if seen is not None:
            seen[1] = max(seen[1], processing_time)

    def is_idle(self, partition: Hashable, processing_time: int) -> bool:
        """Whether ``partition`` (one seen) is left out of the minimum at ``processing_time``."""
        return input_is_idle(self.partitions[partition][1], self.idle_timeout, processing_time)

    def marks(self) -> dict[Hashable, int]:
        """Each partition's own watermark: its largest event time minus ``max_disorder``."""
        return {partition: seen[0] - self.max_disorder for partition, seen in self.partitions.items()}

    def event_watermark(self, processing_time: int) -> int:
        """The minimum over the partitions that are not idle (the largest when all are; the smallest
        timestamp before any element), before ``idle_advanced`` and the never-back rule."""
        marks = self.marks()
        if not marks:
            return MIN_TIMESTAMP
        idle = {partition: self.is_idle(partition, processing_time) for partition in marks}
        return max(MIN_TIMESTAMP, two_input_watermark(marks, idle))

    def last_input(self) -> Optional[int]:
        """The processing time of the input's last element (any partition's)."""
        return max((seen[1] for seen in self.partitions.values()), default=None)

    def compute(self, processing_time: int, last_input: Optional[int] = None) -> int:
        """Advance (never retreat) to the watermark the partitions allow at ``processing_time``.
        ``last_input``: when the input last had any input at all (bad elements included), for
        ``idle_advanced``; by default its last element's."""
        last = last_input if last_input is not None else self.last_input()
        candidate = idle_advanced(self.event_watermark(processing_time), last, self.idle_timeout, processing_time)
        if candidate > self.current:
            self.current = candidate
        return self.current

    def holding_back(self, processing_time: int) -> Optional[tuple[Hashable, int]]:
        """The partition that holds the watermark back at ``processing_time`` (the non-idle one with
        the smallest watermark, the first seen among equals) and its lag behind the most advanced
        partition, in ms; None when no partition holds it back (none, or all idle)."""
        marks = self.marks()
        active = [(mark, partition) for partition, mark in marks.items() if not self.is_idle(partition, processing_time)]
        if not active:
            return None
        slowest_mark, slowest = min(active, key=lambda pair: pair[0])
        return slowest, max(marks.values()) - slowest_mark

    def snapshot(self) -> dict[str, Any]:
        """Plain data (ints, lists and the partition values themselves) to keep in a state store."""
        return {"watermark": self.current,
                "partitions": [[partition, seen[0], seen[1]] for partition, seen in self.partitions.items()]}

    @classmethod
    def restore(cls, max_disorder: int, idle_timeout: Optional[int], snapshot: dict[str, Any]) -> "PartitionWatermarks":
        """The tracker ``snapshot`` describes, under the (possibly changed) ``max_disorder`` and
        ``idle_timeout`` of the running operator."""
        restored = cls(max_disorder, idle_timeout, int(snapshot["watermark"]))
        rows: Iterable[Any] = snapshot["partitions"]
        for partition, max_event_time, last_seen in rows:
            restored.partitions[_hashable(partition)] = [int(max_event_time), int(last_seen)]
        return restored


def _hashable(partition: Any) -> Hashable:
    """A partition value read back from plain data (a list where a tuple was stored)."""
    return tuple(_hashable(p) for p in partition) if isinstance(partition, list) else partition


def slowest_partition(inputs: Iterable[tuple[str, "PartitionWatermarks"]], processing_time: int,
                      ) -> Optional[tuple[str, Hashable, int]]:
    """Of each input's partitions (``(input, tracker)``: ``""`` for a one-input operator's), the
    one holding the watermark back at ``processing_time``, with its input and its lag in ms (the
    input whose slowest partition is furthest behind; the first among equals); None: none holds it
    back (``PartitionWatermarks.holding_back``)."""
    found: list[tuple[int, str, Hashable, int]] = []
    for side, tracker in inputs:
        held = tracker.holding_back(processing_time)
        if held is not None:
            found.append((tracker.marks()[held[0]], side, held[0], held[1]))
    if not found:
        return None
    _, side, partition, lag = min(found, key=lambda item: item[0])
    return side, partition, lag


def partition_label(side: str, partition: Hashable) -> str:
    """A partition holding a watermark back as the output names it: after its input's name in a merge
    (``side``; ``""``: a one-input operator's)."""
    return f"{side} {partition}" if side else str(partition)


class WatermarkTracker:
    """Keeps the operator's watermark monotonic and remembers what its policy needs."""

    __slots__ = ("policy", "current", "upstream", "max_event_time", "last_input", "partitions")

    def __init__(self, policy: WatermarkPolicy, current: int = MIN_TIMESTAMP) -> None:
        self.policy = policy
        self.current = current
        self.upstream = MIN_TIMESTAMP
        self.max_event_time: Optional[int] = None
        #: Processing time of the last input (an element, or an upstream watermark that moved).
        self.last_input: Optional[int] = None
        #: Per-partition event time, under ``bounded_disorder(..., partition=...)``.
        self.partitions: Optional[PartitionWatermarks] = (
            PartitionWatermarks(policy.max_disorder, policy.idle_timeout, current)
            if isinstance(policy, BoundedDisorderWatermark) and policy.partition is not None else None)

    def observe_event_time(self, ts: int, partition: Hashable = None, processing_time: Optional[int] = None) -> None:
        """An element's event time; under a partitioned policy also its partition and the processing
        time it arrived at (both required then)."""
        if self.max_event_time is None or ts > self.max_event_time:
            self.max_event_time = ts
        if self.partitions is not None:
            assert processing_time is not None  # (the runners pass it with every partitioned element)
            self.partitions.observe(partition, ts, processing_time)

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
        elif self.partitions is not None:
            candidate = self.partitions.compute(processing_time, self.last_input)
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

    def observe_event_time(self, side: str, ts: int, processing_time: int, partition: Hashable = None) -> None:
        self.sides[side].observe_event_time(ts, partition, processing_time)
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


def two_input_watermark(marks: Mapping[_Input, int], idle: Mapping[_Input, bool]) -> int:
    """The minimum over the inputs (a merge's, or an input's partitions) that are not idle; the
    largest when all are (Flink's valve)."""
    active = [mark for side, mark in marks.items() if not idle[side]]
    return min(active) if active else max(marks.values())


def needs_processing_time(trigger: Any, watermark: Any, idle_timeout: Optional[int] = None) -> bool:
    """Whether an operator needs processing time to pass (a trigger firing on it, a fixed-lag
    watermark, an idle timeout): on Spark its query then runs in ProcessingTime mode, where time
    passes only in micro-batches, so it needs a ``processingTime`` trigger to see quiet time."""
    return (trigger.to_trigger().uses_processing_time() or isinstance(watermark, FixedLagWatermark)
            or getattr(watermark, "idle_timeout", None) is not None or idle_timeout is not None)
