"""Chained operators: each stage's panes are the next stage's elements (the model of a chain; the
local runner of one is ``runners.chain.ChainRunner``, reached through ``facade``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from .config import Config
from .panes import PaneRecord
from .watermarks import partition_of
from .windows.sliding_windows import SlidingWindows

if TYPE_CHECKING:
    from .facade import ChainRunner


def output_stage(operator: Any) -> Any:
    """The operator whose panes ``operator`` outputs: a chain's last stage, else itself."""
    return getattr(operator, "operators", [operator])[-1]


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
        from .facade import chain_local_runner

        return chain_local_runner([op.local_runner() for op in self.operators])

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
