"""AfterProcessingTime: fires a delay of processing time after the first element of the pane."""
from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from windowed_operator.config import Duration
from windowed_operator.time_rules import is_timer_due

from .base import TimeDomain, Trigger, TriggerContext, earliest


class AfterProcessingTime(Trigger):
    """Beam's ``AfterProcessingTime(delay)``: past the first element in pane plus ``delay`` ms."""

    _positional: ClassVar[tuple[str, ...]] = ("delay",)
    delay: Duration = Field(default=0, ge=0, description="processing-time delay in ms after the pane's first element")

    def on_element(self, ctx: TriggerContext, count: int = 1) -> None:
        if ctx.get("fire_at") is None:
            fire_at = ctx.processing_time + self.delay
            ctx.put("fire_at", fire_at)
            ctx.set_timer(TimeDomain.PROCESSING_TIME, fire_at)

    def on_merge(self, ctx: TriggerContext, sources: list[TriggerContext]) -> None:
        fire_at = earliest([s.get("fire_at") for s in sources] + [ctx.get("fire_at")])
        if fire_at is not None:
            ctx.put("fire_at", fire_at)
            ctx.set_timer(TimeDomain.PROCESSING_TIME, fire_at)

    def should_fire(self, ctx: TriggerContext) -> bool:
        fire_at = ctx.get("fire_at")
        return fire_at is not None and bool(is_timer_due(fire_at, ctx.processing_time))

    def on_fire(self, ctx: TriggerContext) -> bool:
        ctx.clear_timer(TimeDomain.PROCESSING_TIME)
        return True

    def uses_processing_time(self) -> bool:
        return True

    def describe(self) -> str:
        return f"AfterProcessingTime({self.delay} ms)"
