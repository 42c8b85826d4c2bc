"""Python's cyclic garbage collector paused while a key group's batch runs.

A batch of 20,000 touched keys decodes, builds, splits and encodes a few hundred thousand small
lists and dicts.  None of them form reference cycles (reference counting frees them), but their
number alone sets off the collector again and again, and each of its full passes walks every object
the worker holds: measured, it made the per-key record work two to three times slower
(``benchmarks/key_records.py``).  Pausing it for the batch and resuming after leaves one pass over
what the batch left behind.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off inside the block (as it was before, after it: a caller that turned it off
    keeps it off)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


__all__ = ["collector_paused"]
