"""Chained operators in the local runner: each stage's panes are the next stage's elements.

The downstream stage sees a bundle of upstream panes first and the upstream watermark after it,
so an ON_TIME pane reaches the next stage before that stage's own window becomes late.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from .config import Config
from .panes import PaneRecord
from .testing import ElementsEvent, ProcessingTimeEvent, TestStream, WatermarkEvent
from .time import MAX_TIMESTAMP

if TYPE_CHECKING:
    from .local_runner import LocalRunner


class Chain(Config):
    operators: list[Any] = Field(min_length=1)

    def then(self, downstream: Any) -> "Chain":
        return Chain(operators=[*self.operators, downstream])

    def local_runner(self) -> "ChainRunner":
        return ChainRunner([op.local_runner() for op in self.operators])

    def run_local(self, stream: TestStream, finish: bool = True) -> list[PaneRecord]:
        return self.local_runner().run(stream, finish=finish)


class ChainRunner:
    def __init__(self, runners: list["LocalRunner"]) -> None:
        self.runners = runners

    @property
    def outputs(self) -> list[PaneRecord]:
        return self.runners[-1].outputs

    def _propagate(self, emitted: list[PaneRecord], stage: int) -> list[PaneRecord]:
        for runner, upstream in zip(self.runners[stage:], self.runners[stage - 1:]):
            out = runner.add_elements(*emitted) if emitted else []
            out.extend(runner.advance_watermark_to(upstream.watermark))
            emitted = out
        return emitted

    def add_elements(self, *elements: Any) -> list[PaneRecord]:
        return self._propagate(self.runners[0].add_elements(*elements), 1)

    def advance_watermark_to(self, watermark: Any) -> list[PaneRecord]:
        return self._propagate(self.runners[0].advance_watermark_to(watermark), 1)

    def advance_processing_time(self, advance_by: Any) -> list[PaneRecord]:
        emitted = self.runners[0].advance_processing_time(advance_by)
        for stage, runner in enumerate(self.runners[1:], start=1):
            upstream = self.runners[stage - 1]
            out = runner.add_elements(*emitted) if emitted else []
            out.extend(runner.advance_processing_time(advance_by))
            out.extend(runner.advance_watermark_to(upstream.watermark))
            emitted = out
        return emitted

    def finish(self) -> list[PaneRecord]:
        return self.advance_watermark_to(MAX_TIMESTAMP)

    def run(self, stream: TestStream, finish: bool = True) -> list[PaneRecord]:
        emitted: list[PaneRecord] = []
        for event in stream.events:
            if isinstance(event, ElementsEvent):
                emitted.extend(self.add_elements(*event.elements))
            elif isinstance(event, WatermarkEvent):
                emitted.extend(self.advance_watermark_to(event.watermark))
            elif isinstance(event, ProcessingTimeEvent):
                emitted.extend(self.advance_processing_time(event.advance_by))
        if finish and self.runners[-1].watermark < MAX_TIMESTAMP:
            emitted.extend(self.finish())
        return emitted
