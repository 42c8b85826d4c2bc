"""Processing-time clocks for the Spark runner.

By default processing time is Spark's batch clock.  Tests and demos need a clock they control, so
that processing-time triggers are deterministic without sleeping: ``FileClock`` reads the current
time from a file the driver writes (executors run on the same machine in local mode).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SparkBatchClock:
    """Processing time = Spark's batch timestamp (``TimerValues.getCurrentProcessingTimeInMs``)."""

    def now(self, spark_processing_time: int) -> int:
        return spark_processing_time


@dataclass(frozen=True)
class FileClock:
    """Processing time = the integer (ms) in ``path``; write it with :meth:`set`."""

    path: str

    def now(self, spark_processing_time: int) -> int:
        text = Path(self.path).read_text().strip()
        return int(text)

    def set(self, millis: int) -> None:
        tmp = Path(self.path + ".tmp")
        tmp.write_text(str(int(millis)))
        tmp.replace(self.path)  # atomic: a worker never reads a half-written value
