"""A key group's clocks in the worker: its watermark, its heartbeats and its Spark timer.

The watermark a group's batch runs at is Spark's (or a fixed lag behind processing time, or a
merge's from each input's heartbeats, or a per-partition one from the heartbeats' per-partition
maxima, kept in the group's meta record as ``PartitionWatermarks`` snapshots: ``"parts"``, or each
input's under ``"sides"``, or, in a chained stage after a per-partition watermark, the upstream's
from its watermark rows: ``"up"``); the group's timer is the earliest due time of its state
(event time) or the next batch while it holds work (processing time, where groups poll).
"""
from __future__ import annotations

import re
from typing import Any, Hashable, Optional

import pandas as pd
from pyspark import TaskContext
from pyspark.sql.streaming.stateful_processor import TimerValues

from accumulations.merge import SIDES

from ...time import END_OF_INPUT_WATERMARK, MAX_TIMESTAMP, MIN_TIMESTAMP
from ...watermarks import (BoundedDisorderWatermark, FixedLagWatermark, PartitionWatermarks, idle_advanced,
                           input_is_idle, slowest_partition, two_input_watermark)
from ..plan import MERGE_TIME_COLUMN, SIDE_COLUMN, WATERMARK_COLUMN, SparkPlan
from ..scan.heartbeat import max_known, split_beats, split_watermark_beats
from .group_store import SparkGroupStore
from .rows import merge_operator


def spark_timer(due: int, end_of_input_watermark: int = END_OF_INPUT_WATERMARK) -> int:
    """The Spark event-time timer for an event time at which a key group has work.

    Spark's watermark starts at 0 and never goes below it (1970), and its timer index never reaches
    a timer below 0 once later ones exist (measured: such a key group never fired again, and its
    other keys with it), so a due time before 1970 is registered at 1: the group wakes when the
    watermark passes 1970.  Spark's watermark stops at END_OF_INPUT - delay after the end-of-input
    marker: a later due time is registered there, where the processor takes the input as ended.
    """
    return max(1, min(due, end_of_input_watermark))


def query_run() -> Optional[str]:
    """The id of the run of the streaming query this task belongs to (``StreamingQuery.runId``: a new
    one at every start or restart of the query from its checkpoint), or None where Spark does not say.
    Spark makes it the job group of the batch's jobs (and names it in their description)."""
    context = TaskContext.get()
    if context is None:
        return None
    run = context.getLocalProperty("spark.jobGroup.id")
    if run:
        return run
    found = _RUN_ID.search(context.getLocalProperty("spark.job.description") or "")
    return found.group(1) if found else None


_RUN_ID = re.compile(r"runId = ([0-9a-f-]+)")


class GroupTimers:
    """One processor's watermark and timer rules (``plan``), over its state store's timers."""

    def __init__(self, plan: SparkPlan, store: SparkGroupStore) -> None:
        self.plan = plan
        self.store = store
        #: Whether idleness is measured (an idle timeout): on the reading clock (``reading_time``).
        policy = plan.operator.watermark
        self.idle = getattr(policy, "idle_timeout", None) is not None or \
            (plan.merge and getattr(plan.operator, "idle_timeout", None) is not None)

    def reading_time(self, meta: dict, processing_time: int) -> int:
        """The clock idleness is measured on (``idle_timeout``: the group's ``input`` times, its
        partitions' last elements): processing time while the query runs, the time it was stopped
        left out.  A stopped query is not a quiet input: idleness means batches ran and brought
        nothing.  The group's first call in a new run of the query (``query_run``: a restart) takes
        the time since its last call of the previous run out of the clock (``meta["paused"]``), so a
        stop longer than the timeout turns no backlog late.  (A checkpoint written before this clock
        knows no last call: the time since its last input is taken out once.)  Without an idle
        timeout: processing time itself."""
        if not self.idle:
            return processing_time
        run = query_run()
        if run is not None and meta.get("run") != run:
            last = meta.get("seen", meta.get("input"))  # (a new group: neither)
            if last is not None and processing_time > last:
                meta["paused"] = meta.get("paused", 0) + processing_time - last
            meta["run"] = run
        meta["seen"] = processing_time
        return processing_time - meta.get("paused", 0)

    def touch(self, meta: dict, beats: Any, now: int) -> None:
        """Before this batch's watermark: an input (or partition) that brings rows in this batch is
        not idle in it (its event times count from the next batch, as ``note_input`` says; only its
        time of last input moves to ``now``, the reading clock's)."""
        seen, parts = beats
        if not seen or not self.idle:
            return
        meta["input"] = now
        holders = {"": meta} if not self.plan.merge else \
            {side: meta["sides"][side] for side in seen if side in meta.get("sides", {})}
        for side, holder in holders.items():
            if self.plan.merge:
                holder["input"] = now
            if holder.get("parts") is not None:
                tracker = self.partitions(holder)
                for of_side, partition in parts:
                    if of_side == side:
                        tracker.touch(partition, now)
                holder["parts"] = tracker.snapshot()

    def split_beats(self, frame: Optional[pd.DataFrame], meta: dict) -> tuple[Optional[pd.DataFrame], Any]:
        """The group's rows and what its heartbeats say (``note_input`` reads it).  A stage reading its
        upstream's watermark rows (``SparkPlan.upstream_watermark_rows``) keeps the largest upstream
        watermark they carried in ``meta["up"]`` (never back), which ``watermark`` takes in this batch:
        the local chain advances a later stage to its upstream's watermark after the panes that
        came with it (``runners.chain.ChainRunner``)."""
        if self.plan.upstream_watermark_rows:
            frame, upstream = split_watermark_beats(frame, WATERMARK_COLUMN)
            if upstream is not None:
                meta["up"] = max(meta.get("up", MIN_TIMESTAMP), upstream)
            return frame, ({}, {})
        if not self.plan.heartbeats:
            return frame, ({}, {})
        partition_column = self.plan.partition_column
        if self.plan.merge:
            rows, seen, parts = split_beats(frame, SIDE_COLUMN, MERGE_TIME_COLUMN, partition_column)
        else:
            rows, seen, parts = split_beats(frame, None, self.plan.time_column if partition_column else None,
                                            partition_column)
        return rows, (seen, parts)

    def note_input(self, meta: dict, beats: Any, processing_time: int) -> None:
        """After this batch's watermark: what came in counts from the next batch, as Spark's own
        watermark takes a batch's event times from the next batch on.  ``meta["input"]``: the last
        batch with any input; ``meta["sides"]``: each input's last batch with input and largest
        event time (a merge's inputs' watermarks, kept here); under a per-partition watermark, each
        partition's largest event time and last batch observed in the tracker's snapshot
        (``meta["parts"]``, or a merge input's ``"parts"``)."""
        seen, parts = beats
        if not seen:
            return
        processing_time = self.reading_time(meta, processing_time)
        meta["input"] = processing_time
        if self.plan.partition_column is not None and not self.plan.merge:
            self._observe(meta, parts, "", processing_time)
            return
        if "" in seen:
            return
        sides = meta.setdefault("sides", {})
        for side, ts in seen.items():
            info = sides.setdefault(side, {})
            info["input"], info["max"] = processing_time, max_known(info.get("max"), ts)
            if self.plan.partition_column is not None:
                self._observe(info, parts, side, processing_time)

    def _observe(self, holder: dict, parts: dict[tuple[str, Hashable], Optional[int]], side: str,
                 processing_time: int) -> None:
        """The per-partition maxima of one input (``side``) observed in its tracker, kept in ``holder``."""
        tracker = self.partitions(holder)
        for (of_side, partition), ts in parts.items():
            if of_side == side and ts is not None:
                tracker.observe(partition, ts, processing_time)
        holder["parts"] = tracker.snapshot()

    def partitions(self, holder: dict, watermark: int = MIN_TIMESTAMP) -> PartitionWatermarks:
        """The tracker of one input's partitions kept in ``holder`` (a new one at ``watermark``: a
        group that never saw a partition, or a checkpoint written without ``partition=``)."""
        policy = self.plan.operator.watermark
        assert isinstance(policy, BoundedDisorderWatermark)  # (the only policy with partitions)
        snapshot = holder.get("parts")
        if snapshot is None:
            return PartitionWatermarks(policy.max_disorder, policy.idle_timeout, watermark)
        return PartitionWatermarks.restore(policy.max_disorder, policy.idle_timeout, snapshot)

    def watermark(self, timer_values: TimerValues, meta: dict, processing_time: int, beats: Any = ({}, {})) -> int:
        """The group's watermark in this batch (``beats``: what its heartbeats say, ``touch``); idleness
        is measured on the reading clock (``reading_time``)."""
        policy = self.plan.operator.watermark
        now = self.reading_time(meta, processing_time)
        self.touch(meta, beats, now)
        if self.plan.partition_column is None:
            self._forget_partitions(meta)
        if self.plan.upstream_watermark_rows:  # (the upstream's, from its rows: ``split_beats``)
            return max(meta.get("wm", MIN_TIMESTAMP), meta.get("up", MIN_TIMESTAMP))
        if isinstance(policy, FixedLagWatermark):
            candidate = processing_time - policy.lag
        else:
            spark_wm = timer_values.getCurrentWatermarkInMs()
            candidate = spark_wm if spark_wm > 0 else MIN_TIMESTAMP  # Spark reports 0 before any watermark
            if candidate >= self.plan.end_of_input_watermark:  # an end-of-input marker went through
                candidate = MAX_TIMESTAMP
            elif self.plan.merge and self.plan.heartbeats:
                candidate = self._inputs_watermark(meta, policy, now)
            elif self.plan.partition_column is not None:
                candidate = self._partitions_watermark(meta, meta, now)
            else:  # (meta "input": the last batch with input, from the heartbeats)
                candidate = idle_advanced(candidate, meta.get("input"), getattr(policy, "idle_timeout", None), now)
        return max(meta.get("wm", MIN_TIMESTAMP), candidate)

    def _inputs_watermark(self, meta: dict, policy: Any, processing_time: int) -> int:
        """A merge's watermark from each input's own (bounded disorder over its rows, advancing when
        quiet), skipping inputs idle for the operator's ``idle_timeout``, as ``MergeRunner`` does; an
        input that never sent anything counts as active since the first batch with input."""
        sides = meta.get("sides", {})
        start = meta.setdefault("start", processing_time)
        marks, idle = {}, {}
        for side in SIDES:
            info = sides.get(side, {})
            if self.plan.partition_column is not None:
                marks[side] = self._partitions_watermark(sides.setdefault(side, info), meta, processing_time)
                idle[side] = input_is_idle(info.get("input", start), merge_operator(self.plan).idle_timeout,
                                           processing_time)
                continue
            event = policy.candidate(MIN_TIMESTAMP, processing_time, info.get("max"))
            marks[side] = idle_advanced(max(MIN_TIMESTAMP, event), info.get("input"), policy.idle_timeout,
                                        processing_time)
            idle[side] = input_is_idle(info.get("input", start), merge_operator(self.plan).idle_timeout, processing_time)
        return two_input_watermark(marks, idle)

    @staticmethod
    def _forget_partitions(meta: dict) -> None:
        """A restart that removed ``partition=`` (a safe change: ``fingerprint.SAFE_CHANGES``, "watermark"):
        the partitions' trackers its checkpoint holds are dropped (the watermark they reached stays, as
        ``meta["wm"]``)."""
        meta.pop("parts", None)
        for info in meta.get("sides", {}).values():
            info.pop("parts", None)

    def _partitions_watermark(self, holder: dict, meta: dict, processing_time: int) -> int:
        """One input's per-partition watermark at ``processing_time`` (``PartitionWatermarks.compute``:
        never back), its tracker kept in ``holder``; a group restored from a checkpoint without one
        starts it at the group's last watermark."""
        tracker = self.partitions(holder, meta.get("wm", MIN_TIMESTAMP))
        watermark = tracker.compute(processing_time, holder.get("input"))
        holder["parts"] = tracker.snapshot()
        return watermark

    def holding_back(self, meta: dict, processing_time: int) -> Optional[tuple[str, Hashable, int]]:
        """The input and partition holding the group's per-partition watermark back, with its lag in
        ms (``PartitionWatermarks.holding_back``; a merge's: the input whose is furthest behind), or None."""
        if self.plan.partition_column is None:
            return None
        processing_time = self.reading_time(meta, processing_time)
        holders = meta.get("sides", {}) if self.plan.merge else {"": meta}
        return slowest_partition([(side, self.partitions(holder)) for side, holder in holders.items()
                                  if holder.get("parts") is not None], processing_time)

    def schedule_group(self, meta: dict, spark_now: int, watermark: int, *, due: Optional[int],
                       has_due: bool) -> None:
        """The group's timer (its record's ``meta``): at ``due``, the earliest time it has work (EventTime
        mode), or the next batch while it holds any (``has_due``: ProcessingTime mode, where the group
        polls its due indexes).

        With ``SparkPlan.wakes_every_batch`` (a chained stage, the event-time output) the group also
        wakes at every advance of the watermark (every batch, in ProcessingTime mode), so that its last
        watermark is always the previous batch's."""
        if self.plan.time_mode == "EventTime":
            if self.plan.wakes_every_batch and watermark < MAX_TIMESTAMP:
                due = watermark + 1 if due is None else min(due, watermark + 1)
            wanted = spark_timer(due, self.plan.end_of_input_watermark) if due is not None else None
        else:
            wanted = self._poll(meta.get("timer"), spark_now) if has_due or self.plan.wakes_every_batch else None
        self._set_timer(meta, wanted)

    def _poll(self, current: Optional[int], spark_now: int) -> int:
        return current if current is not None and current > spark_now else spark_now + self.plan.poll_ms

    def _set_timer(self, meta: dict, wanted: Optional[int]) -> None:
        current = meta.get("timer")
        if wanted == current:
            return
        if current is not None:
            self.store.delete_timer(current)
        if wanted is not None:
            self.store.register_timer(wanted)
        meta["timer"] = wanted
