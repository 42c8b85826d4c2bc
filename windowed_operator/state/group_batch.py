"""One micro-batch of one key group: the one protocol every state layout's store serves
(``LayoutStore.run_batch``), and the per-key windows' store, in three steps: the watermark's,
processing time's, then the elements'.

Every layout's store (``layouts.Layout.store`` names it; ``stores.open_store`` opens it once per
operator) takes the group's batch (``StoreBatch``: the group, its keys with elements, the clocks,
and what moving the group in from another layout left) and an engine bound to the batch
(``KeyEngine``: the object core and its work per key; ``TableEngine``: a table engine's step over a
table of rows), and returns one ``StoreResult``: the panes by step and when the group next has work.
The store decides what it reads and writes; the engine decides every pane.

The runner reads each key with rows (``GroupState.touch``), asks the due indexes for keys with work
due and runs those that really have some; ``GroupState.commit`` writes back what changed.  Kept
apart from Spark so that tests can count the state calls a batch makes on an in-memory store.

The panes come out by the step that made them (``Phase``) because a chained stage on Spark needs
it: the local chain hands the next stage the panes released by a watermark advance *before* that
stage's own watermark advances, and the panes made by elements after (``windowed_operator.chain``).
A stage fed by another also takes its input rows in those steps (``GroupBatch.released`` and
``GroupBatch.timed``), so a chain on Spark equals the local chain step for step.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional, Protocol, Union

from ..engine.columnar import Panes
from ..engine.core import Emission, WindowedCore
from ..engine.key_state import KeyState
from .group_state import GroupState

#: Runs the core on one key's rows: ``(key, state) -> Emission``.
KeyWork = Callable[[Optional[Hashable], KeyState], Emission]
Work = list[tuple[Optional[Hashable], KeyWork]]


@dataclass
class GroupBatch:
    """One group's work in a batch.  ``work`` holds the batch's own rows; a stage fed by another
    operator also gets ``released`` (upstream panes of the watermark step, to be judged at the
    watermark before this batch's) and ``timed`` (upstream panes of the processing-time step, judged
    at this batch's watermark before processing time advances).  Each closure already carries the
    watermark and processing time it runs at."""

    work: Work = field(default_factory=list)
    released: Work = field(default_factory=list)
    timed: Work = field(default_factory=list)


@dataclass
class PhasedEmission:
    by_phase: tuple[Emission, Emission, Emission] = field(
        default_factory=lambda: (Emission(), Emission(), Emission()))

    def merged(self) -> Emission:
        emission = Emission()
        for part in self.by_phase:
            emission.extend(part)
        return emission


def run_group_steps(core: WindowedCore, group: GroupState, batch: GroupBatch, watermark: int,
                    processing_time: int) -> PhasedEmission:
    """The panes and drops of one batch of one group, by phase.  Call ``group.commit`` afterwards.

    Per key the order is the core's (``WindowedCore.run_batch``): watermark, processing time,
    elements; keys without rows run when the due indexes hold them."""
    out = PhasedEmission()
    released, timed, work = out.by_phase
    everything = [*batch.released, *batch.timed, *batch.work]
    group.preload(key for key, _ in everything)
    for key, run in batch.released:
        released.extend(run(key, group.touch(key)))
    candidates = list(dict.fromkeys([*(key for key, _ in everything), *group.due_keys(watermark, processing_time)]))
    for key in candidates:
        if core.event_time_work_due(group.key(key), watermark):
            released.extend(core.on_watermark(key, group.touch(key), watermark, processing_time))
    for key, run in batch.timed:
        timed.extend(run(key, group.touch(key)))
    for key in candidates:
        if core.processing_time_work_due(group.key(key), processing_time):
            timed.extend(core.on_processing_time(key, group.touch(key), watermark, processing_time))
    for key, run in batch.work:
        work.extend(run(key, group.touch(key)))
    return out


def run_group_batch(core: WindowedCore, group: GroupState, work: Work, watermark: int,
                    processing_time: int) -> Emission:
    """The panes and drops of one batch of one group; ``work`` gives each key with rows and what to
    do with them.  Call ``group.commit`` afterwards."""
    return run_group_steps(core, group, GroupBatch(work=list(work)), watermark, processing_time).merged()


def next_due(core: WindowedCore) -> Callable[[KeyState], tuple[Optional[int], Optional[int]]]:
    """When a key is due next, in event time and in processing time (what ``commit`` indexes)."""
    return lambda state: (core.next_event_time(state), core.next_processing_time(state))


# -- the one protocol of every layout's store ------------------------------------------------------

@dataclass
class Moved:
    """What moving a group in from another layout (``transitions.move_in``) leaves the batch to do:
    emit ``released`` (panes due under the new lateness), run and write ``rows`` (rows bound for row
    shards)."""
    released: Emission = field(default_factory=Emission)
    rows: Any = None


@dataclass
class StoreBatch:
    """One key group's batch as a store takes it: ``keys`` are the keys with elements (a table
    engine's; a key engine's work names its own)."""
    group: GroupState
    keys: list
    watermark: int
    processing_time: int
    moved: Moved = field(default_factory=Moved)


@dataclass
class KeyEngine:
    """The object core bound to one batch: the work per key (``batch``) and, on the window log, the
    batch's elements of every key as arrays (``window_log.ArrayElements``)."""
    core: WindowedCore
    batch: GroupBatch = field(default_factory=GroupBatch)
    arrays: Any = None


@dataclass
class TableEngine:
    """A table engine bound to one batch: ``run`` applies the watermark, processing time and the
    batch's elements to a table of the group's rows and returns the table to store; the panes it
    makes are its own, by step (``out``)."""
    run: Callable[[Any], Any]
    out: tuple[Any, Any, Any] = field(default_factory=lambda: (Panes(), Panes(), Panes()))


GroupEngine = Union[KeyEngine, TableEngine]


@dataclass
class StoreResult:
    """What a store's batch returns: the panes by step (``Phase``; Emissions of a key engine, the
    table engine's own ``out``), and when the group next has work where the store keeps it itself
    (``due``, ``held``: whether anything is held; both None: the group's due indexes tell, which
    ``stores.OperatorState.run_batch`` fills in)."""
    by_phase: tuple[Any, Any, Any]
    due: Optional[int] = None
    held: Optional[bool] = None


class LayoutStore(Protocol):
    """A state layout's store (``layouts.Layout.store``): runs one batch of one group."""

    def run_batch(self, batch: StoreBatch, engine: Any) -> StoreResult: ...


class PerKeyWindows:
    """The per-key windows' store (``layouts.PER_KEY_WINDOWS``): each key's windows in its own record."""

    @classmethod
    def opened(cls, stores: Any) -> "PerKeyWindows":
        return cls()  # (it keeps nothing: the engine brings the core)

    def run_batch(self, batch: StoreBatch, engine: KeyEngine) -> StoreResult:
        phased = run_group_steps(engine.core, batch.group, engine.batch, batch.watermark, batch.processing_time)
        batch.group.commit(next_due(engine.core))
        return StoreResult(phased.by_phase)
