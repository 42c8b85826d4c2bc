"""An operator's semantic core: the engine reads the operator (the model), never the other way.

``build_core`` is what the operators' ``build_core`` method was: the model describes what to compute
and imports nothing of the engine; the runners (local and Spark) and the engine's path choices call
this to get a core for an operator.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .core import WindowedCore

if TYPE_CHECKING:
    from ..operator import WindowingOptions


def build_core(op: "WindowingOptions") -> WindowedCore:
    """A new semantic core for ``op`` (one per runner): its windows, accumulation, trigger, lateness
    and timestamp combiner."""
    return WindowedCore(op.window_option, op.core_accumulation(), op.trigger, op.allowed_lateness,
                        op.timestamp_combiner, label=op.label(), value_column=op.value_column())
