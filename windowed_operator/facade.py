"""The model's doors to its runners: ``op.run_local``/``op.local_runner`` and ``op.apply`` come here.

The operators (``operator``, ``merge_operator``, ``chain``) describe what to compute; the runners
read them.  Their convenience methods that *run* an operator are the one place the model reaches
up into the runners, and they do it only through this module, lazily: the imports below are the
only model-to-runner edges of the package's import graph (``tests/test_import_graph.py`` allows
exactly these), so no import circle runs through the operators and the runners, and importing an
operator loads neither the local runner's engine nor pyspark.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (``X as X``: the runners' types, for the operators' annotations)
    from pyspark.sql import DataFrame as DataFrame

    from .runners.chain import ChainRunner as ChainRunner
    from .runners.local import LocalRunner as LocalRunner
    from .runners.merge import MergeRunner as MergeRunner


def local_runner(op: Any, processing_time: Any = 0) -> "LocalRunner":
    """The local runner of a one-input operator (``OperatorBase.local_runner``)."""
    from .runners.local import LocalRunner

    return LocalRunner(op, processing_time)


def merge_local_runner(op: Any, processing_time: Any = 0) -> "MergeRunner":
    """The local runner of a merge operator (``MergeOperatorBase.local_runner``)."""
    from .runners.merge import MergeRunner

    return MergeRunner(op, processing_time)


def chain_local_runner(runners: list[Any]) -> "ChainRunner":
    """The local runner of a chain, over its stages' runners (``Chain.local_runner``)."""
    from .runners.chain import ChainRunner

    return ChainRunner(runners)


def spark_apply(op: Any, df: "DataFrame", **options: Any) -> "DataFrame":
    """``op.apply(df, ...)``: the operator's panes over a streaming DataFrame (``spark.driver.apply``)."""
    from .spark.driver.apply import apply_operator

    return apply_operator(op, df, **options)


def spark_apply_merge(op: Any, left: "DataFrame", right: "DataFrame", **options: Any) -> "DataFrame":
    """``merge_op.apply(left, right, ...)``: a merge operator's panes over two streaming DataFrames."""
    from .spark.driver.merge import apply_merge_operator

    return apply_merge_operator(op, left, right, **options)


def spark_apply_chain(operators: list[Any], df: "DataFrame", *others: "DataFrame", **options: Any) -> "DataFrame":
    """``chain.apply(df, ...)``: the last stage's panes, every stage in one streaming query."""
    from .spark.driver.chain import apply_chain

    return apply_chain(operators, df, *others, **options)
