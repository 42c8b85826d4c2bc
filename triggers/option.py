"""TriggerOption: the fluent, validated way to say when panes fire and what happens after.

It compiles to the same trigger state machines as the composite triggers:
``at_watermark().with_early_firings_at_every(count=2)`` is ``AfterWatermark(early=AfterCount(2))``.
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Literal, Optional

from pydantic import Field, model_validator

from windowed_operator.config import Config, Duration

from .base import Trigger
from .count import AfterCount
from .processing_time import AfterProcessingTime
from .watermark import AfterWatermark, DefaultTrigger


class AccumulationMode(str, Enum):
    """What a window keeps after it fires a pane."""

    ACCUMULATING = "accumulating"
    DISCARDING = "discarding"
    ACCUMULATING_AND_RETRACTING = "accumulating_and_retracting"


class Firing(Config):
    """Early or late firings: every ``duration`` ms of processing time, or every ``count`` elements."""

    duration: Optional[Duration] = Field(default=None, gt=0, description="processing-time period in ms")
    count: Optional[int] = Field(default=None, gt=0, description="elements per firing")

    @model_validator(mode="after")
    def _exactly_one(self) -> "Firing":
        if (self.duration is None) == (self.count is None):
            raise ValueError("give exactly one of duration= or count=")
        return self

    def to_trigger(self) -> Trigger:
        """``AfterCount(count)`` or ``AfterProcessingTime(duration)``."""
        if self.count is not None:
            return AfterCount(self.count)
        return AfterProcessingTime(self.duration)


class TriggerOption(Config):
    """``kind``: ``default`` (Beam's default trigger), ``at_watermark`` or ``custom`` (a composite trigger)."""

    kind: Literal["default", "at_watermark", "custom"] = "default"
    early: Optional[Firing] = None
    late: Optional[Firing] = None
    trigger: Optional[Trigger] = None
    only_updated_panes: bool = False
    mode: AccumulationMode = AccumulationMode.DISCARDING

    @model_validator(mode="after")
    def _consistent(self) -> "TriggerOption":
        if self.kind == "custom" and self.trigger is None:
            raise ValueError("trigger: a custom trigger option needs a trigger")
        if self.kind != "custom" and self.trigger is not None:
            raise ValueError("trigger: only a custom trigger option takes a trigger")
        if self.kind == "default" and (self.early is not None or self.late is not None):
            raise ValueError("kind: early/late firings need kind 'at_watermark'")
        return self

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def default(cls) -> "TriggerOption":
        """Beam's default trigger: an ON_TIME pane when the watermark passes the window's end, then a LATE
        pane for every late bundle within allowed lateness; discarding mode.
        """
        return cls()

    @classmethod
    def at_watermark(cls) -> "TriggerOption":
        """``AfterWatermark()``: one ON_TIME pane, then closed, until early or late firings are added."""
        return cls(kind="at_watermark")

    @classmethod
    def of(cls, trigger: Trigger) -> "TriggerOption":
        """Any trigger tree (``Repeatedly(AfterCount(2))``, ``AfterEach(...)``...) as an option."""
        return cls(kind="custom", trigger=trigger)

    def _with(self, **changes: Any) -> "TriggerOption":
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        fields.update(changes)
        return type(self)(**fields)

    # -- fluent modifiers ---------------------------------------------------------------------
    def with_early_firings_at_every(self, duration: Any = None, *, count: Optional[int] = None) -> "TriggerOption":
        """Early (EARLY) panes before the window's end: every ``duration`` of processing time (ms, timedelta
        or ``"5s"``) or every ``count`` elements, repeatedly.
        """
        kind = "at_watermark" if self.kind == "default" else self.kind
        return self._with(kind=kind, early=Firing(duration=duration, count=count))

    def with_late_firings_at_every(self, duration: Any = None, *, count: Optional[int] = None) -> "TriggerOption":
        """Late (LATE) panes after the ON_TIME pane, within allowed lateness: every ``duration`` of processing
        time or every ``count`` late elements, repeatedly.
        """
        kind = "at_watermark" if self.kind == "default" else self.kind
        return self._with(kind=kind, late=Firing(duration=duration, count=count))

    def fire_only_updated_panes(self) -> "TriggerOption":
        """Suppress a pane whose value equals the window's last output (and, retracting, its retraction)."""
        return self._with(only_updated_panes=True)

    def accumulating_fired_panes(self) -> "TriggerOption":
        """Accumulating mode: a window keeps its state after a pane, so each pane holds everything so far."""
        return self._with(mode=AccumulationMode.ACCUMULATING)

    def discarding_fired_panes(self) -> "TriggerOption":
        """Discarding mode (Beam's default): a window's state is cleared after each pane."""
        return self._with(mode=AccumulationMode.DISCARDING)

    def accumulating_and_retracting_fired_panes(self) -> "TriggerOption":
        """Accumulating-and-retracting mode: accumulating, and each re-fired pane is preceded by the
        retraction of the previous one (``is_retraction=True``), so downstream sums stay exact.
        """
        return self._with(mode=AccumulationMode.ACCUMULATING_AND_RETRACTING)

    # -- compilation --------------------------------------------------------------------------
    def to_trigger(self) -> Trigger:
        """The trigger state machine this option compiles to (``DefaultTrigger``, ``AfterWatermark(early, late)``
        or the custom tree).
        """
        if self.kind == "custom":
            assert self.trigger is not None
            return self.trigger
        if self.kind == "default":
            return DefaultTrigger()
        return AfterWatermark(
            early=self.early.to_trigger() if self.early is not None else None,
            late=self.late.to_trigger() if self.late is not None else None,
        )

    def fires_once_at_end(self, allowed_lateness: int) -> bool:
        """Whether each window gets exactly one pane, ON_TIME, when the watermark passes its end:
        Beam's default trigger or a bare ``at_watermark()`` (no early or late firings), with no
        allowed lateness (so no late pane).  Elements then never join a window that fired: what the
        state logs (pane log, window log) and the native later stage rely on."""
        bare = self.kind == "default" or (self.kind == "at_watermark" and self.early is None and self.late is None)
        return bare and allowed_lateness == 0

    @property
    def retracting(self) -> bool:
        """Whether the mode is accumulating-and-retracting."""
        return self.mode == AccumulationMode.ACCUMULATING_AND_RETRACTING

    @property
    def discarding(self) -> bool:
        """Whether the mode is discarding."""
        return self.mode == AccumulationMode.DISCARDING

    def describe(self) -> str:
        """The trigger tree and the mode as one line, for messages."""
        extra = " only-updated" if self.only_updated_panes else ""
        return f"{self.to_trigger().describe()} [{self.mode.value}{extra}]"
