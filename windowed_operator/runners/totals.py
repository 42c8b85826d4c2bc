"""What a run produced, summed over its micro-batches (Spark) or bundles (the local runner), and the
one line both runners print for it, so `run` and `run --local` report alike."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass
class Totals:
    steps: int = 0
    #: None where the runner does not count the rows it was given.
    input_rows: Optional[int] = None
    panes: int = 0
    late_rows_dropped: int = 0
    bad_rows: int = 0

    def add(self, panes: int, late_rows_dropped: int = 0, bad_rows: int = 0,
            input_rows: Optional[int] = None) -> None:
        """One more step (micro-batch or bundle) and what it produced."""
        self.steps += 1
        self.panes += panes
        self.late_rows_dropped += late_rows_dropped
        self.bad_rows += bad_rows
        if input_rows is not None:
            self.input_rows = (self.input_rows or 0) + input_rows

    def line(self, name: str, step: str = "batches") -> str:
        rows = f", {self.input_rows} rows in" if self.input_rows is not None else ""
        bad = f", {self.bad_rows} bad rows" if self.bad_rows else ""
        return (f"{name}: {self.steps} {step}{rows}, {self.panes} panes out, "
                f"{self.late_rows_dropped} late rows dropped{bad}")
