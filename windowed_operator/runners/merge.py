"""The local runner of a merge operator: a one-input runner with two readers and two watermarks."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Hashable, Optional

from accumulations.merge import SIDES

from ..panes import PaneRecord
from ..testing import _elements
from ..time import MAX_TIMESTAMP, to_millis
from ..watermarks import PartitionWatermarks, TwoInputWatermarkTracker
from .local import LocalRunner

if TYPE_CHECKING:
    from ..merge_operator import MergeOperatorBase


class MergeRunner(LocalRunner):
    """Steps name their input: ``add_elements("left", ...)``, ``advance_watermark_to("right", t)``,
    ``mark_idle("right")``.  Processing time is shared."""

    # Two inputs' watermarks: the steps that feed the one-input tracker are overridden below, and the rest of
    # LocalRunner reads only what both trackers have (current, compute).
    tracker: TwoInputWatermarkTracker  # type: ignore[assignment]

    def __init__(self, operator: "MergeOperatorBase", processing_time: Any = 0) -> None:
        super().__init__(operator, processing_time)  # type: ignore[arg-type]

    def _build_inputs(self, operator: Any) -> None:
        self.readers = {side: operator.build_reader(side) for side in SIDES}
        self.tracker = TwoInputWatermarkTracker(operator.watermark, SIDES, operator.idle_timeout,
                                                self.processing_time)

    def _check(self, side: str) -> str:
        if side not in SIDES:
            raise ValueError(f"side must be 'left' or 'right', got {side!r}")
        return side

    def add_elements(self, side: str, *elements: Any,  # type: ignore[override]
                     partition: Optional[Hashable] = None) -> list[PaneRecord]:
        """One bundle of one input; ``partition``: the partition of that input all its elements came
        from (each input has its own partitions)."""
        return self._add_bundle([self._part(side, _elements(elements), partition)])

    def add_elements_from_both(self, left: list, right: list) -> list[PaneRecord]:
        """One bundle holding elements of both inputs, as a Spark micro-batch does (count triggers
        are evaluated once per bundle)."""
        return self._add_bundle([self._part("left", tuple(left)), self._part("right", tuple(right))])

    def _part(self, side: str, elements: tuple, partition: Optional[Hashable] = None) -> tuple:
        tracker, now = self.tracker, self.processing_time

        def observe(ts: int, element_partition: Optional[Hashable]) -> None:
            tracker.observe_event_time(side, ts, now, element_partition)

        def note_input(processing_time: int) -> None:
            tracker.note_input(side, processing_time)

        return elements, self.readers[self._check(side)], observe, note_input, partition, side

    def advance_watermark_to(self, side: str, watermark: Any) -> list[PaneRecord]:  # type: ignore[override]
        self.tracker.observe_upstream(self._check(side), to_millis(watermark), self.processing_time)
        return self._advance_watermark()

    def _partition_trackers(self) -> list[tuple[str, PartitionWatermarks]]:
        return [(side, tracker.partitions) for side, tracker in self.tracker.sides.items()
                if tracker.partitions is not None]

    def mark_idle(self, side: str) -> list[PaneRecord]:
        """The input will send nothing for a while: stop waiting for it (until its next element)."""
        self.tracker.mark_idle(self._check(side))
        return self._advance_watermark()

    def advance_watermark_to_infinity(self) -> list[PaneRecord]:
        emitted: list[PaneRecord] = []
        for side in SIDES:
            emitted.extend(self.advance_watermark_to(side, MAX_TIMESTAMP))
        return emitted
