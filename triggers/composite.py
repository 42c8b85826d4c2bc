"""Triggers of triggers: Repeatedly, AfterEach, AfterAny, AfterAll, OrFinally (Beam semantics)."""
from __future__ import annotations

from typing import ClassVar, Optional

from pydantic import Field

from .base import Trigger, TriggerContext


class Repeatedly(Trigger):
    """Fires whenever its sub-trigger fires, resetting it each time; never finishes."""

    _positional: ClassVar[tuple[str, ...]] = ("trigger",)
    trigger: Trigger

    def on_element(self, ctx: TriggerContext, count: int = 1) -> None:
        self.trigger.on_element(ctx.nested(0), count)

    def on_merge(self, ctx: TriggerContext, sources: list[TriggerContext]) -> None:
        self.trigger.on_merge(ctx.nested(0), [s.nested(0) for s in sources])

    def should_fire(self, ctx: TriggerContext) -> bool:
        return self.trigger.should_fire(ctx.nested(0))

    def on_fire(self, ctx: TriggerContext) -> bool:
        sub = ctx.nested(0)
        if self.trigger.on_fire(sub):
            self.trigger.reset(sub)
        return False

    def may_finish(self) -> bool:
        return False

    def uses_processing_time(self) -> bool:
        return self.trigger.uses_processing_time()

    def describe(self) -> str:
        return f"Repeatedly({self.trigger.describe()})"


class _Parallel(Trigger):
    """Triggers that watch all their children at once."""

    _varargs: ClassVar[Optional[str]] = "triggers"
    triggers: list[Trigger] = Field(min_length=1)

    def on_element(self, ctx: TriggerContext, count: int = 1) -> None:
        for i, trigger in enumerate(self.triggers):
            trigger.on_element(ctx.nested(i), count)

    def on_merge(self, ctx: TriggerContext, sources: list[TriggerContext]) -> None:
        for i, trigger in enumerate(self.triggers):
            trigger.on_merge(ctx.nested(i), [s.nested(i) for s in sources])

    def _fire_ready(self, ctx: TriggerContext) -> list[bool]:
        finished = []
        for i, trigger in enumerate(self.triggers):
            sub = ctx.nested(i)
            if trigger.should_fire(sub):
                finished.append(trigger.on_fire(sub))
        return finished

    def reset(self, ctx: TriggerContext) -> None:
        for i, trigger in enumerate(self.triggers):
            trigger.reset(ctx.nested(i))

    def uses_processing_time(self) -> bool:
        return any(t.uses_processing_time() for t in self.triggers)

    def describe(self) -> str:
        return f"{type(self).__name__}({', '.join(t.describe() for t in self.triggers)})"


class AfterAny(_Parallel):
    """Fires when any child fires; finishes when a child that fired finishes."""

    def should_fire(self, ctx: TriggerContext) -> bool:
        return any(t.should_fire(ctx.nested(i)) for i, t in enumerate(self.triggers))

    def on_fire(self, ctx: TriggerContext) -> bool:
        return any(self._fire_ready(ctx))

    def may_finish(self) -> bool:
        return any(t.may_finish() for t in self.triggers)


class AfterAll(_Parallel):
    """Fires when every child is ready at once; finishes when they all finish."""

    def should_fire(self, ctx: TriggerContext) -> bool:
        return all(t.should_fire(ctx.nested(i)) for i, t in enumerate(self.triggers))

    def on_fire(self, ctx: TriggerContext) -> bool:
        return all(self._fire_ready(ctx))

    def may_finish(self) -> bool:
        return all(t.may_finish() for t in self.triggers)


class AfterEach(Trigger):
    """Runs its children in sequence: the next one starts when the current one finishes."""

    _varargs: ClassVar[Optional[str]] = "triggers"
    triggers: list[Trigger] = Field(min_length=1)

    def _current(self, ctx: TriggerContext) -> int:
        return ctx.get("index", 0)

    def on_element(self, ctx: TriggerContext, count: int = 1) -> None:
        ix = self._current(ctx)
        if ix < len(self.triggers):
            self.triggers[ix].on_element(ctx.nested(ix), count)

    def on_merge(self, ctx: TriggerContext, sources: list[TriggerContext]) -> None:
        ix = max([self._current(s) for s in sources] + [self._current(ctx)])
        ctx.put("index", ix)
        if ix < len(self.triggers):
            self.triggers[ix].on_merge(ctx.nested(ix), [s.nested(ix) for s in sources if self._current(s) == ix])

    def should_fire(self, ctx: TriggerContext) -> bool:
        ix = self._current(ctx)
        return ix < len(self.triggers) and self.triggers[ix].should_fire(ctx.nested(ix))

    def on_fire(self, ctx: TriggerContext) -> bool:
        ix = self._current(ctx)
        if ix < len(self.triggers) and self.triggers[ix].on_fire(ctx.nested(ix)):
            ix += 1
            ctx.put("index", ix)
        return ix >= len(self.triggers)

    def may_finish(self) -> bool:
        return all(t.may_finish() for t in self.triggers)

    def uses_processing_time(self) -> bool:
        return any(t.uses_processing_time() for t in self.triggers)

    def describe(self) -> str:
        return f"AfterEach({', '.join(t.describe() for t in self.triggers)})"


class OrFinally(AfterAny):
    """``main.orfinally(until)``, or ``OrFinally(main, until)``: fires as ``main`` does and finishes as
    soon as ``until`` fires."""

    triggers: list[Trigger] = Field(min_length=2, max_length=2, description="[main, until]")

    def on_fire(self, ctx: TriggerContext) -> bool:
        main, until = self.triggers[0], self.triggers[1]
        main_ctx, until_ctx = ctx.nested(0), ctx.nested(1)
        if until.should_fire(until_ctx):
            until.on_fire(until_ctx)
            return True
        return main.on_fire(main_ctx)

    def may_finish(self) -> bool:
        return True

    def describe(self) -> str:
        return f"{self.triggers[0].describe()}.orfinally({self.triggers[1].describe()})"


Trigger._or_finally = OrFinally  # (``Trigger.orfinally``: the one way to it, without an import back)
