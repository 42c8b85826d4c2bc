"""AfterCount: fires once at least ``count`` elements have arrived in the pane."""
from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from .base import Trigger, TriggerContext


class AfterCount(Trigger):
    """Evaluated once per bundle, as Beam does: a bundle of 5 elements with ``AfterCount(2)`` fires once."""

    _positional: ClassVar[tuple[str, ...]] = ("count",)
    count: int = Field(gt=0, description="elements needed before the trigger fires")

    def on_element(self, ctx: TriggerContext, count: int = 1) -> None:
        ctx.put("count", ctx.get("count", 0) + count)

    def on_merge(self, ctx: TriggerContext, sources: list[TriggerContext]) -> None:
        ctx.put("count", sum(s.get("count", 0) for s in sources) + ctx.get("count", 0))

    def should_fire(self, ctx: TriggerContext) -> bool:
        return ctx.get("count", 0) >= self.count

    def on_fire(self, ctx: TriggerContext) -> bool:
        return True

    def describe(self) -> str:
        return f"AfterCount({self.count})"
