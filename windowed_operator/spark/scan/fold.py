"""The scan-stage folds' one protocol.

Before the shuffle, a ``mapInArrow`` pass may fold each partition's rows so that fewer cross it
(``paths.Fold``): partials per (key, pane) (``preaggregate``), chains of session elements
(``prechain``), candidate rows (``preselect``) or sketches (``prefold``) per (key, pane).  Each is a
``ScanFold``; the driver builds the one ``paths.choose_paths`` chose and installs it in the query
(``spark.driver.folds``), and the processor reads its rows by the fold the plan names.
"""
from __future__ import annotations

from typing import Any, Iterator, Protocol

import pyarrow as pa
from pyspark.sql.types import StructType


class ScanFold(Protocol):
    """What every scan-stage fold answers: the driver installs it (``install_fold``), Spark calls it
    on each partition's Arrow batches, and the plan takes ``plan_updates`` for the worker."""

    @property
    def input_columns(self) -> list[str]:
        """The columns it reads, in order."""
        ...

    def output_schema(self) -> StructType:
        """The Spark schema of the rows it hands on (known without analysing the input)."""
        ...

    def plan_updates(self) -> dict[str, Any]:
        """``SparkPlan`` fields the processor needs to read its rows (its aggregate columns...)."""
        ...

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """A partition's batches folded (called in the scan stage, on the executors)."""
        ...


__all__ = ["ScanFold"]
