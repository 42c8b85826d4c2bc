"""The Spark runner: the semantic core inside ``transformWithStateInPandas``.

This package is the only place that imports pyspark.  Its public names are in ``_EXPORTS``, the one
table: each is imported from its module on first use (``__getattr__``), so ``import
windowed_operator.spark`` stays cheap (the driver-side pre-init of each stateful operator imports it
only to declare state: ``worker.deferred``), and each is the function itself once used, with its own
signature and docstring; type checkers and IDEs read the imports under ``TYPE_CHECKING``.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (``X as X``: re-exported, for type checkers)
    from .base.clock import FileClock as FileClock, SparkBatchClock as SparkBatchClock
    from .driver.apply import apply_operator as apply_operator
    from .driver.merge import apply_merge_operator as apply_merge_operator
    from .plan.outputs import Outputs as Outputs, apply_outputs as apply_outputs, split_outputs as split_outputs
    from .plan import END_OF_INPUT as END_OF_INPUT, OUTPUT_COLUMNS as OUTPUT_COLUMNS, SparkPlan as SparkPlan
    from .base.progress import (batch_progress as batch_progress, print_progress as print_progress,
                                stop_at_end_of_input as stop_at_end_of_input)
    from .base.shipping import (library_zip as library_zip, ship_library as ship_library,
                                shipping_conf as shipping_conf)
    from .base.session import local_session as local_session
    from .driver.feed import with_watermark as with_watermark

#: Each public name and the module (under this package) that defines it.
_EXPORTS = {
    "apply_operator": "driver.apply", "apply_merge_operator": "driver.merge",
    "apply_outputs": "plan.outputs", "split_outputs": "plan.outputs", "Outputs": "plan.outputs",
    "local_session": "base.session", "stop_at_end_of_input": "base.progress", "print_progress": "base.progress",
    "FileClock": "base.clock", "SparkBatchClock": "base.clock", "batch_progress": "base.progress",
    "ship_library": "base.shipping", "library_zip": "base.shipping", "shipping_conf": "base.shipping",
    "END_OF_INPUT": "plan", "OUTPUT_COLUMNS": "plan", "SparkPlan": "plan", "with_watermark": "driver.feed",
}

__all__ = list(_EXPORTS)  # noqa: PLE0604 (the names of _EXPORTS, the one table)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
