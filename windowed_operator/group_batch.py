"""One micro-batch of one key group on per-key state: the keys with rows, then the keys due.

The runner reads each key with rows (``GroupState.touch``), runs the core on it (element by element
or as arrays), then asks the due indexes for keys with work due and runs those that really have
some; ``GroupState.commit`` writes back what changed.  Kept apart from Spark so that tests can count
the state calls a batch makes on an in-memory store.
"""
from __future__ import annotations

from typing import Callable, Hashable, Iterable, Optional

from .core import Emission, WindowedCore
from .group_state import GroupState
from .state import KeyState

#: Runs the core on one key's rows: ``(key, state) -> Emission``.
KeyWork = Callable[[Optional[Hashable], KeyState], Emission]


def run_group_batch(core: WindowedCore, group: GroupState, work: Iterable[tuple[Optional[Hashable], KeyWork]],
                    watermark: int, processing_time: int) -> Emission:
    """The panes and drops of one batch of one group; ``work`` gives each key with rows and what to
    do with them.  Call ``group.commit`` afterwards."""
    emission = Emission()
    seen: set = set()
    work = list(work)
    group.preload(key for key, _ in work)
    for key, run in work:
        seen.add(key)
        emission.extend(run(key, group.touch(key)))
    for key in group.due_keys(watermark, processing_time):
        if key in seen:
            continue
        state = group.key(key)
        if core.event_time_work_due(state, watermark) or core.processing_time_work_due(state, processing_time):
            emission.extend(core.process_batch(key, group.touch(key), [], watermark, processing_time))
    return emission


def next_due(core: WindowedCore) -> Callable[[KeyState], tuple[Optional[int], Optional[int]]]:
    """When a key is due next, in event time and in processing time (what ``commit`` indexes)."""
    return lambda state: (core.next_event_time(state), core.next_processing_time(state))
