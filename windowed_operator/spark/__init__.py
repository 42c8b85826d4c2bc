"""The Spark runner: the semantic core inside ``transformWithStateInPandas``.

This package is the only place that imports pyspark.  Its pure-Python parts (the plan, the clocks,
the pane-to-row conversion) are importable without Spark so they can be unit-tested fast.
"""
from typing import Any

from .clock import FileClock, SparkBatchClock


def __getattr__(name: str) -> Any:
    """The plan's names, imported when asked: importing this package stays cheap (the driver-side
    pre-init of each stateful operator imports it only to declare state: ``deferred``)."""
    if name in ("END_OF_INPUT", "OUTPUT_COLUMNS", "SparkPlan"):
        from . import plan

        return getattr(plan, name)
    if name == "Outputs":
        from .outputs import Outputs

        return Outputs
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["apply_operator", "apply_merge_operator", "apply_outputs", "split_outputs", "Outputs", "local_session",
           "stop_at_end_of_input", "print_progress", "FileClock", "SparkBatchClock", "END_OF_INPUT", "OUTPUT_COLUMNS",
           "SparkPlan"]


def apply_operator(*args, **kwargs):  # noqa: D401 - thin lazy wrapper so `import windowed_operator.spark` is cheap
    """See :func:`windowed_operator.spark.driver.apply.apply_operator`."""
    from .driver.apply import apply_operator as _apply

    return _apply(*args, **kwargs)


def local_session(*args, **kwargs):
    """See :func:`windowed_operator.spark.session.local_session`."""
    from .session import local_session as _session

    return _session(*args, **kwargs)


def apply_merge_operator(*args, **kwargs):
    """See :func:`windowed_operator.spark.driver.merge.apply_merge_operator`."""
    from .driver.merge import apply_merge_operator as _apply

    return _apply(*args, **kwargs)


def stop_at_end_of_input(*args, **kwargs):
    """See :func:`windowed_operator.spark.progress.stop_at_end_of_input`."""
    from .progress import stop_at_end_of_input as _stop

    return _stop(*args, **kwargs)


def print_progress(*args, **kwargs):
    """See :func:`windowed_operator.spark.progress.print_progress`."""
    from .progress import print_progress as _print

    return _print(*args, **kwargs)


def apply_outputs(*args, **kwargs):
    """See :func:`windowed_operator.spark.outputs.apply_outputs`."""
    from .outputs import apply_outputs as _apply

    return _apply(*args, **kwargs)


def split_outputs(*args, **kwargs):
    """See :func:`windowed_operator.spark.outputs.split_outputs`."""
    from .outputs import split_outputs as _split

    return _split(*args, **kwargs)
