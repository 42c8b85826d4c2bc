"""The trigger protocol (Beam's TriggerFn) and the context a trigger sees for one window.

Triggers are stateless, validated descriptions; everything they remember lives in the window's
trigger-state dict, addressed by the trigger's path in the trigger tree, so the whole state of a
window is plain data that a runner can serialize.  Every trigger answers ``on_element``,
``on_merge``, ``should_fire``, ``on_fire`` (returning whether it has finished) and ``reset``;
composite triggers are triggers of triggers and call these on their children through nested
contexts.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Callable, ClassVar, Optional

from windowed_operator.config import Config
from windowed_operator.time_rules import end_of_window_due, is_end_reached
from windowed_operator.windows.base import Window


class TimeDomain(str, Enum):
    """Which clock a timer follows: the watermark (event time) or processing time."""

    WATERMARK = "watermark"
    PROCESSING_TIME = "processing_time"


class TriggerContext:
    """One window's trigger state, timers and clocks, seen from one node of the trigger tree."""

    __slots__ = ("window", "state", "timers", "watermark", "processing_time", "path")

    def __init__(self, window: Window, state: dict, timers: dict, watermark: int, processing_time: int,
                 path: str = "") -> None:
        self.window = window
        self.state = state
        self.timers = timers
        self.watermark = watermark
        self.processing_time = processing_time
        self.path = path

    def nested(self, tag: Any) -> "TriggerContext":
        """The context of a child trigger, its state and timers kept under ``tag`` below this node's path."""
        return TriggerContext(self.window, self.state, self.timers, self.watermark, self.processing_time,
                              f"{self.path}{tag}/")

    def get(self, name: str, default: Any = None) -> Any:
        """A value this trigger node stored for the window, or ``default``."""
        return self.state.get(self.path + name, default)

    def put(self, name: str, value: Any) -> None:
        """Store a value for this trigger node and window (plain data: it is checkpointed)."""
        self.state[self.path + name] = value

    def clear(self, name: str) -> None:
        """Forget one value of this node."""
        self.state.pop(self.path + name, None)

    def set_timer(self, domain: TimeDomain, time: int) -> None:
        """Ask to be asked again (``should_fire``) once the watermark or processing time reaches ``time``."""
        self.timers[f"{self.path}@{domain.value}"] = time

    def clear_timer(self, domain: TimeDomain) -> None:
        """Cancel this node's timer in ``domain``."""
        self.timers.pop(f"{self.path}@{domain.value}", None)

    def clear_subtree(self) -> None:
        """Forget all state and timers of this node and its children."""
        for key in [k for k in self.state if k.startswith(self.path)]:
            del self.state[key]
        for key in [k for k in self.timers if k.startswith(self.path)]:
            del self.timers[key]

    @property
    def is_past_end_of_window(self) -> bool:
        """Whether the watermark has reached the window's end (the rule of ``time_rules.is_end_reached``)."""
        return is_end_reached(self.window.max_timestamp, self.watermark)

    def set_end_of_window_timer(self) -> None:
        """Set the watermark timer that falls due when the window's end is reached."""
        self.set_timer(TimeDomain.WATERMARK, end_of_window_due(self.window.max_timestamp))


class Trigger(Config):
    """Base of every trigger; see the module docstring for the protocol."""

    #: How ``orfinally`` builds its ``OrFinally``: set where that class is defined (``triggers.composite``),
    #: so that this protocol module imports none of the triggers built on it.
    _or_finally: ClassVar[Optional[Callable[["Trigger", "Trigger"], "Trigger"]]] = None

    def on_element(self, ctx: TriggerContext, count: int = 1) -> None:
        """``count`` elements of one bundle arrived in the window."""

    def on_merge(self, ctx: TriggerContext, sources: list[TriggerContext]) -> None:
        """The window of ``ctx`` replaces the windows of ``sources`` (session merge)."""

    def should_fire(self, ctx: TriggerContext) -> bool:
        """Whether the window should fire a pane now.

        The core asks after each bundle's elements reached the window, after a merge, and when a
        timer of the window falls due (the watermark or processing time moved).  What a firing
        changes belongs in ``on_fire``, which the core calls next when this returns True.
        """
        raise NotImplementedError

    def on_fire(self, ctx: TriggerContext) -> bool:
        """Called when the trigger fires; returns True when the trigger has finished."""
        raise NotImplementedError

    def reset(self, ctx: TriggerContext) -> None:
        """Forget this trigger's state and timers for the window (``Repeatedly`` resets its child after each firing)."""
        ctx.clear_subtree()

    def uses_processing_time(self) -> bool:
        """Whether any part of this trigger waits on processing time (runners pick a time mode by it)."""
        return False

    def may_finish(self) -> bool:
        """Whether this trigger can finish (after which later elements of the window are dropped)."""
        return True

    def orfinally(self, until: "Trigger") -> "Trigger":
        """This trigger, finishing for good once ``until`` fires (Beam's ``orFinally``)."""
        make = Trigger._or_finally
        assert make is not None  # (set by ``triggers.composite``, which the package imports with this module)
        return make(self, until)

    def describe(self) -> str:
        """A short text of the trigger tree, for messages and fingerprints."""
        return type(self).__name__


def earliest(values: list[Optional[int]]) -> Optional[int]:
    present = [v for v in values if v is not None]
    return min(present) if present else None
