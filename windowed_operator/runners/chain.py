"""Chained operators in the local runner: each stage's panes are the next stage's elements.

The downstream stage sees a bundle of upstream panes first and the upstream watermark after it,
so an ON_TIME pane reaches the next stage before that stage's own window becomes late.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ..panes import PaneRecord, as_consumed
from ..testing import replay
from ..time import MAX_TIMESTAMP

if TYPE_CHECKING:
    from .local import LocalRunner
    from .merge import MergeRunner


class ChainRunner:
    """The local runner of a chain: one ``LocalRunner`` per stage, each stage's panes handed to
    the next as its elements (``chain.as_consumed``), the watermark handed on as the local Spark
    chain does, so that ``run_local`` and Spark give the same panes."""

    def __init__(self, runners: list["LocalRunner"]) -> None:
        self.runners = runners

    @property
    def outputs(self) -> list[PaneRecord]:
        return self.runners[-1].outputs

    @property
    def watermark(self) -> int:
        """The last stage's watermark (the one its panes were fired at)."""
        return self.runners[-1].watermark

    @property
    def processing_time(self) -> int:
        return self.runners[0].processing_time

    def _propagate(self, emitted: list[PaneRecord], stage: int) -> list[PaneRecord]:
        for runner, upstream in zip(self.runners[stage:], self.runners[stage - 1:]):
            emitted = as_consumed(emitted, upstream.operator)
            out = runner.add_elements(*emitted) if emitted else []
            out.extend(runner.advance_watermark_to(upstream.watermark))
            emitted = out
        return emitted

    def add_elements(self, *args: Any, **named: Any) -> list[PaneRecord]:
        """A bundle of the first stage's input (``partition=``: the input partition it came from)."""
        return self._propagate(self.runners[0].add_elements(*args, **named), 1)

    def _merge_head(self) -> "MergeRunner":
        # (the two-input steps are for a chain that starts with a merge operator, whose runner is a MergeRunner)
        return cast("MergeRunner", self.runners[0])

    def add_elements_from_both(self, left: list, right: list) -> list[PaneRecord]:
        return self._propagate(self._merge_head().add_elements_from_both(left, right), 1)

    def advance_watermark_to(self, *args: Any) -> list[PaneRecord]:
        return self._propagate(self.runners[0].advance_watermark_to(*args), 1)

    def mark_idle(self, side: str) -> list[PaneRecord]:
        return self._propagate(self._merge_head().mark_idle(side), 1)

    def advance_processing_time(self, advance_by: Any) -> list[PaneRecord]:
        emitted = self.runners[0].advance_processing_time(advance_by)
        for stage, runner in enumerate(self.runners[1:], start=1):
            upstream = self.runners[stage - 1]
            emitted = as_consumed(emitted, upstream.operator)
            out = runner.add_elements(*emitted) if emitted else []
            out.extend(runner.advance_processing_time(advance_by))
            out.extend(runner.advance_watermark_to(upstream.watermark))
            emitted = out
        return emitted

    def finish(self) -> list[PaneRecord]:
        return self._propagate(self.runners[0].finish(), 1)

    def run(self, stream: Any, finish: bool = True) -> list[PaneRecord]:
        emitted = replay(stream.events, self)
        if finish and self.runners[-1].watermark < MAX_TIMESTAMP:
            emitted.extend(self.finish())
        return emitted
