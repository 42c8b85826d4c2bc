"""Chained operators in the local runner: each stage's panes are the next stage's elements.

The downstream stage sees a bundle of upstream panes first and the upstream watermark after it,
so an ON_TIME pane reaches the next stage before that stage's own window becomes late.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from pydantic import Field, model_validator

from .config import Config
from .panes import PaneRecord, as_consumed
from .testing import replay
from .time import MAX_TIMESTAMP
from .watermarks import partition_of
from .windows.sliding_windows import SlidingWindows

if TYPE_CHECKING:
    from .facade import LocalRunner, MergeRunner


def check_consumable(upstream: Any, downstream: Any) -> None:
    """A retracting stage's retractions are folded out of the next stage's windows with its
    accumulation's inverse: without one the downstream values would silently be wrong, so the
    pairing is refused where the chain is built."""
    if not upstream.trigger.retracting:
        return
    accumulation = downstream.core_accumulation()
    if isinstance(downstream.window, SlidingWindows):
        raise ValueError(f"{downstream.label()} cannot follow {upstream.label()}: the upstream retracts "
                         "panes (accumulating_and_retracting) and per-record sliding windows cannot fold a "
                         "retraction out; use another window, or a mode without retractions upstream")
    if not accumulation.supports_subtract():
        raise ValueError(f"{downstream.label()} cannot follow {upstream.label()}: the upstream retracts panes "
                         f"(accumulating_and_retracting) and {type(accumulation).__name__} has no inverse to "
                         "fold a retraction out (Sum, Count and Mean do); use a mode without retractions "
                         "upstream, or an invertible accumulation")


class Chain(Config):
    """Operators run one after another (``op.then(op2)``): each receives the panes of the one before
    as elements, keeps their windows when it has no window option of its own (window propagation)
    and its watermark follows the upstream operator's."""

    operators: list[Any] = Field(min_length=1)

    @model_validator(mode="after")
    def _retractions_can_be_consumed(self) -> "Chain":
        for upstream, downstream in zip(self.operators, self.operators[1:]):
            check_consumable(upstream, downstream)
            if partition_of(downstream.watermark) is not None:
                raise ValueError(f"{downstream.label()} follows {upstream.label()}'s watermark: only the first stage "
                                 "computes per-partition watermarks (its panes carry no partition); remove partition= "
                                 "from the later stage")
        return self

    def then(self, downstream: Any) -> "Chain":
        """This chain with ``downstream`` as its last stage (each stage's panes are the next one's elements)."""
        return Chain(operators=[*self.operators, downstream])

    def local_runner(self) -> "ChainRunner":
        """A local runner that feeds each stage's panes to the next at the step that made them."""
        return ChainRunner([op.local_runner() for op in self.operators])

    def run_local(self, stream: Any, finish: bool = True) -> list[PaneRecord]:
        """Run ``stream`` (a ``TestStream``) through every stage and return the last stage's panes;
        ``finish`` ends the input at the end (watermark to infinity).
        """
        return self.local_runner().run(stream, finish=finish)

    def apply(self, df: Any, *others: Any, **options: Any) -> Any:
        """The last operator's panes over the streaming DataFrame ``df`` (and ``others``: the right
        input when the chain starts with a merge), in one streaming query; ``options`` go to the first
        operator's ``apply()`` (``time_mode``, ``clock``, ``key_groups`` and ``state_encoding`` to every
        stage's).  See ``windowed_operator.spark.driver.chain``."""
        from .facade import spark_apply_chain

        return spark_apply_chain(self.operators, df, *others, **options)


class ChainRunner:
    def __init__(self, runners: list["LocalRunner"]) -> None:
        self.runners = runners

    @property
    def outputs(self) -> list[PaneRecord]:
        return self.runners[-1].outputs

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
