"""The deterministic in-process runner: drives the core from a test stream or step by step."""
from __future__ import annotations

import dataclasses
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, Hashable, Optional

from ..elements import BadElementError, TimestampedValue
from ..engine.build import build_core
from ..engine.core import CoreElement, Emission, WindowedCore
from ..engine.fired_by import Clauses, Phase, causes
from ..engine.key_state import KeyState
from ..panes import DroppedElement, Firing, InputRow, PaneRecord, of_input
from ..testing import _elements, replay
from ..time import MAX_TIMESTAMP, to_duration_millis, to_millis
from ..watermarks import PartitionWatermarks, WatermarkTracker, partition_label, partition_of, slowest_partition

if TYPE_CHECKING:
    from ..operator import OperatorBase


class LocalRunner:
    """Holds every key's state in memory; each step returns the records it emitted, in order.

    Keys are visited in the order they first appeared, so output order is deterministic.
    """

    def __init__(self, operator: "OperatorBase", processing_time: Any = 0) -> None:
        self.operator = operator
        self.core: WindowedCore = build_core(operator)
        self.states: dict[Optional[Hashable], KeyState] = {}
        self.processing_time = to_millis(processing_time)
        self._build_inputs(operator)
        self.outputs: list[PaneRecord] = []
        #: For each output, when it was emitted: ``(step, processing time, watermark)``; a step is one
        #: call of add_elements / advance_watermark_to / advance_processing_time (the pane timeline's
        #: vertical axis, see ``windowed_operator.viz``).
        self.emitted_at: list[tuple[int, int, int]] = []
        self.steps = 0
        self.late_data: list[DroppedElement] = []
        self.dead_letters: list[DroppedElement] = []
        self.dropped_counts: Counter = Counter()
        #: The names of the trigger's clauses, where each pane says why it fired (``fired_by``).
        self.clauses: Optional[Clauses] = Clauses.of(operator.trigger) if operator.fired_by else None

    def _build_inputs(self, operator: Any) -> None:
        self.reader = operator.build_reader()
        self.tracker = WatermarkTracker(operator.watermark)

    @property
    def watermark(self) -> int:
        return self.tracker.current

    def holding_back(self) -> Optional[str]:
        """Under a per-partition watermark, the partition holding it back now, named as the Spark
        runner names it (``watermarks.slowest_partition``), else None."""
        if self.watermark >= MAX_TIMESTAMP:
            return None
        held = slowest_partition(self._partition_trackers(), self.processing_time)
        return None if held is None else partition_label(held[0], held[1])

    def _partition_trackers(self) -> list[tuple[str, PartitionWatermarks]]:
        """Each input's per-partition tracker (``""``: the one input's), where it has one."""
        partitions = self.tracker.partitions
        return [] if partitions is None else [("", partitions)]

    # -- steps --------------------------------------------------------------------------------
    def add_elements(self, *elements: Any, partition: Optional[Hashable] = None) -> list[PaneRecord]:
        """One bundle.  Every element is read before any state changes, so a bad element that raises
        leaves the runner exactly as it was.  ``partition``: the input partition every element of
        the bundle came from (``bounded_disorder(partition=...)``), instead of the partition field."""
        return self._add_bundle([(_elements(elements), self.reader, self._observe, self.tracker.note_input,
                                  partition, None)])

    def _observe(self, ts: int, partition: Optional[Hashable]) -> None:
        self.tracker.observe_event_time(ts, partition, self.processing_time)

    def _add_bundle(self, parts: list[tuple[tuple, Any, Callable[[int, Optional[Hashable]], None],
                                            Callable[[int], None], Optional[Hashable], Optional[str]]],
                    ) -> list[PaneRecord]:
        """One bundle made of ``(elements, reader, observe, note_input, partition, input)`` parts (a
        merge's bundle has one per input): ``observe`` takes each element's event time and partition,
        ``note_input`` the processing time at which the input was not quiet
        (``watermarks.idle_advanced``), ``partition`` names the partition of the part's elements (None:
        each element's partition field, under a partitioned watermark), ``input`` the merge's input
        they came on (None: a one-input operator's)."""
        if any(part[4] is not None for part in parts) and partition_of(self.operator.watermark) is None:
            raise ValueError(f"{self.operator.label()}: the bundle names its partition, but the operator's watermark "
                             "is not per partition: give it watermark=bounded_disorder(..., partition='<field>')")
        self.steps += 1
        watermark = self.tracker.current
        batches: dict[Optional[Hashable], list[CoreElement]] = {}
        origins: dict[Optional[Hashable], list[Any]] = {}
        observers: dict[Optional[Hashable], list[tuple[Callable[[int, Optional[Hashable]], None], int,
                                                       Optional[Hashable]]]] = {}
        bad: list[DroppedElement] = []
        for elements, reader, observe, note_input, partition, side in parts:
            if elements:
                note_input(self.processing_time)
            for element in elements:
                try:
                    read = reader.read(element, watermark, self.processing_time, partition)
                except BadElementError as exc:
                    if self.operator.on_bad_element == "raise":
                        raise
                    bad.append(DroppedElement(exc.reason, element, key=exc.key, detail=exc.detail, watermark=watermark,
                                              input=side))
                    continue
                batches.setdefault(read.key, []).append((read.timestamp, read.value, read.window))
                # (what a late element reports: the element as it arrived, its time apart as on Spark)
                origin = element.value if isinstance(element, TimestampedValue) else element
                origins.setdefault(read.key, []).append(origin if side is None else InputRow(side, origin))
                observers.setdefault(read.key, []).append((observe, read.timestamp, read.partition))
        for dropped in bad:
            self.dropped_counts[dropped.reason.value] += 1
            self.dead_letters.append(dropped)
        emitted: list[PaneRecord] = []
        held = self._held()  # (before the bundle's partitions count)
        for key, batch in batches.items():
            for observe, ts, partition in observers[key]:
                observe(ts, partition)
            state = self.states.setdefault(key, KeyState())
            self._collect(self.core.process_batch(key, state, batch, watermark, self.processing_time, origins[key]),
                          emitted, Phase.ELEMENTS, watermark, held)
            self._forget_if_empty(key)
        emitted.extend(self._advance_watermark())
        return emitted

    def advance_watermark_to(self, watermark: Any) -> list[PaneRecord]:
        self.tracker.observe_upstream(to_millis(watermark), self.processing_time)
        return self._advance_watermark()

    def advance_watermark_to_infinity(self) -> list[PaneRecord]:
        return self.advance_watermark_to(MAX_TIMESTAMP)

    def advance_processing_time(self, advance_by: Any) -> list[PaneRecord]:
        self.processing_time += to_duration_millis(advance_by)
        emitted: list[PaneRecord] = []
        held = self._held()
        for key in list(self.states):
            state = self.states[key]
            if self.core.processing_time_work_due(state, self.processing_time):
                self._collect(self.core.on_processing_time(key, state, self.watermark, self.processing_time), emitted,
                              Phase.PROCESSING_TIME, self.watermark, held)
        emitted.extend(self._advance_watermark())
        return emitted

    def finish(self) -> list[PaneRecord]:
        """End of input: the watermark goes to infinity, every window fires what it holds and expires."""
        return self.advance_watermark_to_infinity()

    def run(self, stream: Any, finish: bool = True) -> list[PaneRecord]:
        emitted = replay(stream.events, self)
        if finish and self.watermark < MAX_TIMESTAMP:
            emitted.extend(self.finish())
        return emitted

    # -- internals ----------------------------------------------------------------------------
    def _advance_watermark(self) -> list[PaneRecord]:
        self.steps += 1
        before = self.tracker.current
        after = self.tracker.compute(self.processing_time)
        emitted: list[PaneRecord] = []
        if after == before:
            return emitted
        held = self._held()
        for key in list(self.states):
            state = self.states[key]
            if self.core.event_time_work_due(state, after):
                self._collect(self.core.on_watermark(key, state, after, self.processing_time), emitted,
                              Phase.WATERMARK, after, held)
                self._forget_if_empty(key)
        return emitted

    def _held(self) -> Optional[str]:
        """The partition holding the watermark back, read once per step where panes say why they
        fired (``fired_by``)."""
        return self.holding_back() if self.clauses is not None else None

    def _collect(self, emission: Emission, emitted: list[PaneRecord], phase: Phase, watermark: int,
                 held: Optional[str]) -> None:
        """A step's emission (``phase``, at ``watermark``; ``held``: the partition holding the
        watermark back, as the step read it): its panes (each saying why it fired, with
        ``fired_by``) and its drops."""
        if self.clauses is not None and emission.outputs:
            emission.outputs = self._fired(emission.outputs, phase, watermark, held, self.clauses)
        emitted.extend(emission.outputs)
        self.outputs.extend(emission.outputs)
        self.emitted_at.extend([(self.steps, self.processing_time, self.tracker.current)] * len(emission.outputs))
        for dropped in emission.dropped:
            self.dropped_counts[dropped.reason.value] += 1
            if self.operator.late_data_output:
                self.late_data.append(of_input(dropped))

    @staticmethod
    def _fired(panes: list[PaneRecord], phase: Phase, watermark: int, held: Optional[str],
               clauses: Clauses) -> list[PaneRecord]:
        found = causes([(p.key, p.window_start, p.window_end) for p in panes], [p.timing.value for p in panes],
                       [p.is_last for p in panes], [p.is_retraction for p in panes], phase, watermark, clauses)
        return [dataclasses.replace(p, firing=Firing(cause or "", watermark, held)) for p, cause in zip(panes, found)]

    def _forget_if_empty(self, key: Optional[Hashable]) -> None:
        if self.states[key].is_empty():
            del self.states[key]
