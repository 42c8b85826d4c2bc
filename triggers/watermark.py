"""Event-time triggers: AfterWatermark (with early and late firings) and Beam's default trigger."""
from __future__ import annotations

from typing import ClassVar, Optional

from .base import TimeDomain, Trigger, TriggerContext


class DefaultTrigger(Trigger):
    """Beam's default: fire when the watermark passes the end of the window, then on every late bundle."""

    def on_element(self, ctx: TriggerContext, count: int = 1) -> None:
        if not ctx.is_past_end_of_window:
            ctx.set_end_of_window_timer()

    def on_merge(self, ctx: TriggerContext, sources: list[TriggerContext]) -> None:
        self.on_element(ctx)

    def should_fire(self, ctx: TriggerContext) -> bool:
        return ctx.is_past_end_of_window

    def on_fire(self, ctx: TriggerContext) -> bool:
        ctx.clear_timer(TimeDomain.WATERMARK)
        return False

    def may_finish(self) -> bool:
        return False


class AfterWatermark(Trigger):
    """Fires ON_TIME when the watermark reaches the window's max timestamp.

    ``early`` fires repeatedly before that, ``late`` repeatedly after it (both are wrapped in
    ``Repeatedly`` as Beam does).  Without ``late`` the trigger finishes at the on-time pane and
    later elements of the window are dropped as arriving in a closed window.
    """

    _positional: ClassVar[tuple[str, ...]] = ()
    early: Optional[Trigger] = None
    late: Optional[Trigger] = None

    def _early(self) -> Optional[Trigger]:
        from .composite import Repeatedly

        return Repeatedly(self.early) if self.early is not None else None

    def _late(self) -> Optional[Trigger]:
        from .composite import Repeatedly

        return Repeatedly(self.late) if self.late is not None else None

    @staticmethod
    def _is_late(ctx: TriggerContext) -> bool:
        return bool(ctx.get("late", False))

    def on_element(self, ctx: TriggerContext, count: int = 1) -> None:
        if self._is_late(ctx):
            late = self._late()
            if late is not None:
                late.on_element(ctx.nested("late"), count)
        else:
            if not ctx.is_past_end_of_window:  # (as Beam: only a timer set before the end holds the watermark)
                ctx.set_end_of_window_timer()
            early = self._early()
            if early is not None:
                early.on_element(ctx.nested("early"), count)

    def on_merge(self, ctx: TriggerContext, sources: list[TriggerContext]) -> None:
        # As Beam: the merged window is late only if every merged window was and the watermark is
        # past the merged window's end; otherwise it is early again and its late state is dropped.
        late_now = all(self._is_late(s) for s in sources) and ctx.is_past_end_of_window
        early, late = self._early(), self._late()
        if late_now:
            ctx.put("late", True)
            if late is not None:
                late.on_merge(ctx.nested("late"), [s.nested("late") for s in sources])
        else:
            ctx.clear("late")
            if not ctx.is_past_end_of_window:
                ctx.set_end_of_window_timer()
            if early is not None:
                early.on_merge(ctx.nested("early"), [s.nested("early") for s in sources])
            ctx.nested("late").clear_subtree()

    def should_fire(self, ctx: TriggerContext) -> bool:
        if self._is_late(ctx):
            late = self._late()
            return late is not None and late.should_fire(ctx.nested("late"))
        if ctx.is_past_end_of_window:
            return True
        early = self._early()
        return early is not None and early.should_fire(ctx.nested("early"))

    def on_fire(self, ctx: TriggerContext) -> bool:
        if self._is_late(ctx):
            late = self._late()
            return late is None or late.on_fire(ctx.nested("late"))
        if ctx.is_past_end_of_window:
            ctx.clear_timer(TimeDomain.WATERMARK)
            ctx.nested("early").clear_subtree()
            ctx.put("late", True)
            return self.late is None
        early = self._early()
        if early is not None:
            early.on_fire(ctx.nested("early"))
        return False

    def reset(self, ctx: TriggerContext) -> None:
        early, late = self._early(), self._late()
        if early is not None:
            early.reset(ctx.nested("early"))
        if late is not None:
            late.reset(ctx.nested("late"))

    def may_finish(self) -> bool:
        return self.late is None

    def uses_processing_time(self) -> bool:
        return any(t is not None and t.uses_processing_time() for t in (self.early, self.late))

    def describe(self) -> str:
        parts = []
        if self.early is not None:
            parts.append(f"early={self.early.describe()}")
        if self.late is not None:
            parts.append(f"late={self.late.describe()}")
        return f"AfterWatermark({', '.join(parts)})"
