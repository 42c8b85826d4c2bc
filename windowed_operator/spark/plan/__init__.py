"""What the Spark processor needs to know, resolved once on the driver (pure Python, picklable)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional, Union


from ...elements import BadElementError, ReadElement
from ...operator import WindowingOptions
from ...panes import HELD_BY_ROW_COLUMN, INPUT_COLUMN, OUTPUT_COLUMNS, SIDE_OUTPUT_COLUMNS, WATERMARK_ROW_COLUMN, pane_from_row
from ...time import END_OF_INPUT, END_OF_INPUT_WATERMARK
from ...watermarks import BoundedDisorderWatermark, partition_of
from ..base.clock import FileClock, SparkBatchClock
from .paths import WHOLE_ROWS, Paths, stage_layout

#: The key group of a row (``pmod(xxhash64(key), key_groups)``): what the processor's input is grouped by.
GROUP_COLUMN = "__wo_group"
#: The key a chained stage's rows are grouped by when it is computed from the upstream's panes.
ROUTE_COLUMN = "__wo_route"

#: Columns of the processor's count rows: elements dropped as late, and bad elements (dead letters),
#: per call.  Null on every other row; the runner observes their sums (``observedMetrics`` in the
#: query's progress) and filters the count rows out, so drops are visible without a late-data output.
LATE_COUNT_COLUMN = "__wo_late_dropped"
BAD_COUNT_COLUMN = "__wo_bad"
COUNT_COLUMNS = [LATE_COUNT_COLUMN, BAD_COUNT_COLUMN]
#: Under a per-partition watermark the count rows also carry, from every call, the watermark the
#: group ran at and the partition holding it back with its lag (``GroupTimers.holding_back``;
#: ``driver.stage.observe_drops`` observes them as ``watermark_ms``, ``held_back_by``,
#: ``held_back_lag_ms``).  So do those of a stage that hands its watermark on to the next stage of a
#: chain (``SparkPlan.hands_on_watermark``: its pane rows keep them as watermark rows).
WATERMARK_COLUMN = WATERMARK_ROW_COLUMN
HELD_BY_COLUMN = HELD_BY_ROW_COLUMN
HELD_LAG_COLUMN = "__wo_held_lag"
PARTITION_COUNT_COLUMNS = [WATERMARK_COLUMN, HELD_BY_COLUMN, HELD_LAG_COLUMN]

#: The output column holding each pane's event time for Spark's watermark (``spark_event_time``).
EVENT_TIME_COLUMN = "event_time"

#: What a pane's attributes are called among a stage's pane rows (``index`` is ``pane_index``).
PANE_COLUMN_OF = {**{name: name for name in OUTPUT_COLUMNS}, "index": "pane_index"}

#: Which step of its batch made a pane (``engine.fired_by.Phase``): what a chained stage reads to take
#: the pane at the step the local chain would (``spark.chain``); dropped from the public output.
PHASE_COLUMN = "__wo_phase"

#: The union of a merge operator's two inputs: which input a row came from, its key and event time
#: (epoch ms), and the input's own row as a struct column per side (null on the other side's rows).
SIDE_COLUMN = "__wo_side"
#: A chain's output column naming the stage (0: the first) whose late data or dead letter a row is.
STAGE_COLUMN = "stage"
#: Every column a side row may have besides the key: what a stage reading panes leaves out.
SIDE_ROW_COLUMNS = (*SIDE_OUTPUT_COLUMNS, INPUT_COLUMN, STAGE_COLUMN)
#: The side columns' processor types (times in epoch ms, as every time the processor outputs).
_SIDE_TYPES = {"record_type": "string", "reason": "string", "element": "string", "element_timestamp": "bigint",
               INPUT_COLUMN: "string", STAGE_COLUMN: "int"}
MERGE_KEY_COLUMN = "__wo_key"
MERGE_TIME_COLUMN = "__wo_ts"
#: A merge's rows: each input's partition column, as a string (``bounded_disorder(partition=...)``;
#: the heartbeats read it, the reader reads the payload's own field).
MERGE_PARTITION_COLUMN = "__wo_part"
PAYLOAD_COLUMNS = {"left": "__wo_left", "right": "__wo_right"}
#: ``SparkPlan.value_column`` of a merge on the array path: each row's input payload, marked by side
#: (``accumulations.merge.SidedValues``), as joins and cogroups keep them.
SIDED_VALUES = "<sided>"


class SideDispatchReader:
    """Reads a row of the merged inputs with the reader of the input it came from; a bad row's error
    names the input and the user's columns (``names``: (side, internal column, user's column)), and
    shows the input's row, not the union's internal columns."""

    def __init__(self, readers: dict[str, Any], names: tuple[tuple[str, str, str], ...] = ()) -> None:
        self.readers = readers
        self.names = names

    def read(self, record: dict, default_timestamp: int, now: Optional[int] = None) -> ReadElement:
        side = record[SIDE_COLUMN]
        try:
            return self.readers[side].read(record, default_timestamp, now)
        except BadElementError as exc:
            detail = exc.detail
            for named_side, internal, column in self.names:
                if named_side == side:
                    detail = detail.replace(repr(internal), repr(column))
            error = BadElementError(exc.reason, record.get(PAYLOAD_COLUMNS[side], record), f"{side} input: {detail}")
            error.key = exc.key
            raise error from None


class UpstreamPaneReader:
    """Reads a row of an upstream stage's panes as the local chain hands it over: as that pane."""

    def __init__(self, reader: Any, upstream: WindowingOptions) -> None:
        self.reader = reader
        self.upstream = upstream

    def read(self, record: dict, default_timestamp: int, now: Optional[int] = None) -> ReadElement:
        return self.reader.read(pane_from_row(record, self.upstream), default_timestamp, now)



def each_group(keyed: bool, key_groups: int, group_values: Optional[tuple[int, ...]]) -> tuple[int, ...]:
    """Each key group's value in Spark, in group order, what a heartbeat for each group carries: the
    balanced placement's ints (``driver.key_groups``), else the bigints ``0 .. key_groups - 1``; one
    group, 0, for a non-keyed operator."""
    if not keyed:
        return (0,)
    return group_values if group_values is not None else tuple(range(key_groups))

@dataclass(frozen=True)
class SparkPlan:
    """Everything a stateful stage's worker needs, resolved on the driver and pickled to the
    executors: the operator, its columns and types, the time mode, the paths (``paths.Paths``), the
    key groups, and what the stage reads and hands on.  The worker decides nothing the plan says."""

    operator: WindowingOptions
    keyed: bool
    time_mode: str  # "EventTime" or "ProcessingTime"
    value_type: str
    key_type: Optional[str]
    side_outputs: bool
    clock: Union[SparkBatchClock, FileClock] = field(default_factory=SparkBatchClock)
    #: ProcessingTime mode polls each key with state once per batch (the watermark has no timers there).
    poll_ms: int = 1
    #: Rows are the union of a merge operator's two inputs (see ``SIDE_COLUMN``).
    merge: bool = False
    #: Columns the processor reads directly: the key (None for non-keyed), the event time (epoch ms)
    #: and the value the accumulation folds (None when it reads no column or the array path is off).
    key_column: Optional[str] = None
    time_column: str = ""
    value_column: Optional[str] = None
    #: The engine, the scan fold and the handoff (``paths``): decided on the driver, read by the worker.
    paths: Paths = Paths()
    #: How a chain's element values travel (``prechain.value_dtype``; None: no values).
    chain_values: Optional[str] = None
    #: The partials' aggregate columns, in ``ColumnarForm.partial_aggregates`` order.
    partial_columns: tuple[str, ...] = ()
    #: Keys are hashed into this many groups; each group is one state value and one timer.
    key_groups: int = 16
    #: Each key group's value in Spark, an int (a balanced placement: ``driver.key_groups``); None: the
    #: bigint ``pmod(xxhash64(key), key_groups)`` itself.
    group_values: Optional[tuple[int, ...]] = None
    #: "json" (data only) or "pickle" (also values of other types, e.g. a custom accumulator's object).
    state_encoding: str = "json"
    #: What the state is keyed by (the key column, or both inputs' key columns of a merge): part of
    #: the state's fingerprint, so that a restart with another key is refused.
    state_key: Optional[str] = None
    #: A Spark accumulator counting dropped late elements (the progress display reads it on the driver).
    drop_counter: Any = None
    #: The processor's input columns in order: with struct columns in the input, pyspark 4.3 hands the
    #: processor frames whose columns are named ``_0``, ``_1``... (measured), so names are restored.
    input_columns: tuple[str, ...] = ()
    #: The session's time zone, converting packed timestamps as pyspark's row path would.
    timezone: Optional[str] = None
    #: A merge's (side, internal column, user's column) for each column it renames (errors name the user's).
    merge_names: tuple[tuple[str, str, str], ...] = ()
    #: A chained stage's place in its chain (the first: 0): its side rows, and those of the stages
    #: before it that it hands on, say which stage kept them in ``STAGE_COLUMN``.  None: one operator.
    stage: Optional[int] = None
    #: Side rows, where there are any (``side_outputs``), name the merge input they came on
    #: (``INPUT_COLUMN``): a merge's, and those of the later stages of a chain starting with one that
    #: hand its side rows on.
    input_column: bool = False
    #: The operator whose panes are the input (a chained stage: ``spark.chain``), or None for raw rows.
    upstream: Optional[WindowingOptions] = None
    #: A chained stage's end-of-input watermark: its upstream's (see ``end_of_input_watermark``).
    inherited_end_of_input: Optional[int] = None
    #: Add ``EVENT_TIME_COLUMN``, declared as the output's event-time column (``spark_event_time``).
    event_time_output: bool = False
    #: Input columns of integral Spark types: pandas turns such a column with a null into floats, and
    #: a dead letter's JSON must show its integers as integers.
    integral_columns: tuple[str, ...] = ()
    #: Rows carry heartbeats (``heartbeat``): each group learns of every batch with input (idle timeouts).
    heartbeats: bool = False
    #: The stage's watermark is its upstream's, read from the upstream's watermark rows, which reach
    #: every key group as heartbeats (``scan.heartbeat.WatermarkBeats``) and take effect in the batch
    #: they come in, after its panes (a chained stage after a per-partition watermark: Spark's own
    #: runs ahead of that one).
    upstream_watermark_rows: bool = False
    #: Every call reports the group's watermark on its count row, the group wakes every batch, and
    #: the pane rows a next stage reads keep those count rows (``feed.pane_rows``): the next stage
    #: advances to exactly this stage's watermark (a per-partition watermark's stage, or a stage
    #: after one, followed by another stage of the chain).
    hands_on_watermark: bool = False

    @property
    def folded_in_scan(self) -> bool:
        """Whether the scan stage hands on folded rows (partials, chains, pre-selected rows or
        sketches) instead of the input's: such a fold selects its own columns."""
        return self.paths.folded_in_scan

    @property
    def partition_column(self) -> Optional[str]:
        """The column naming each row's input partition under a per-partition watermark (the
        operator then computes its watermark from the heartbeats' per-partition maxima), or None."""
        field_name = partition_of(self.operator.watermark)
        if field_name is None or self.upstream is not None:
            return None
        return MERGE_PARTITION_COLUMN if self.merge else field_name

    @property
    def fired_by(self) -> bool:
        """Whether each pane says why it fired (the operator's ``fired_by``: ``engine.fired_by``)."""
        return bool(getattr(self.operator, "fired_by", False))

    @property
    def reports_watermark(self) -> bool:
        """Whether the count rows carry the group's watermark (``PARTITION_COUNT_COLUMNS``): under a
        per-partition watermark, and where a stage hands its watermark on or follows its upstream's rows."""
        return self.partition_column is not None or self.hands_on_watermark or self.upstream_watermark_rows

    @property
    def runs_behind_sparks_watermark(self) -> bool:
        """Whether the stage's watermark can be behind Spark's (a per-partition one: Spark's is over all
        partitions; or a later stage following one): a next stage of its chain must then follow it,
        handed on as rows (``hands_on_watermark``), not Spark's, under which its panes would be late."""
        return self.partition_column is not None or self.upstream_watermark_rows

    def columns_read(self, gap_column: Optional[str]) -> Optional[tuple[str, ...]]:
        """The only input columns the processor reads, where it reads only some: the columnar engine
        reads the key, the event time, the value column, a session gap column (``gap_column``) and a
        partition column (``partition_column``), and with no late-data or dead-letter output no row leaves whole (a bad row's error shows the
        columns read).  None where whole rows are read (other paths, side outputs): every column
        then goes to Python.  Shipping only these is what Spark's column pruning does for its own
        aggregations; Nexmark q11 (sessions counting bids, given all five bid columns) ran 1.15x
        faster by median of 4 alternating runs."""
        if not self.paths.engine.table or self.side_outputs or self.value_column == WHOLE_ROWS:
            return None
        read = (self.key_column, self.time_column, self.value_column, gap_column, self.partition_column)
        return tuple(dict.fromkeys(name for name in read if name))

    @property
    def end_of_input_watermark(self) -> int:
        """The Spark watermark from which the input has ended: exactly ``END_OF_INPUT - delay`` under
        a bounded-disorder watermark (no data row can move it there: rows at or after END_OF_INPUT
        do not count), ``END_OF_INPUT_WATERMARK`` under an upstream one (whose delay is unknown)."""
        if self.inherited_end_of_input is not None:
            return self.inherited_end_of_input
        policy = self.operator.watermark
        if isinstance(policy, BoundedDisorderWatermark):
            return END_OF_INPUT - policy.max_disorder
        return END_OF_INPUT_WATERMARK

    def record_reader(self) -> Any:
        """What turns one input row (a dict) into a core element, on the executors."""
        if self.upstream is not None:
            return UpstreamPaneReader(self.operator.build_reader(), self.upstream)  # type: ignore[attr-defined]
        if not self.merge:
            return self.operator.build_reader()  # type: ignore[attr-defined]
        key = MERGE_KEY_COLUMN if self.keyed else None
        return SideDispatchReader({
            side: self.operator.build_reader(side, payload=column, key=key,  # type: ignore[attr-defined]
                                             timestamp=MERGE_TIME_COLUMN)
            for side, column in PAYLOAD_COLUMNS.items()}, self.merge_names)

    def groups(self) -> tuple[int, ...]:
        """Each key group's value in Spark, in group order (``each_group``)."""
        return each_group(self.keyed, self.key_groups, self.group_values)

    def processor_fields(self) -> list[tuple[str, str]]:
        """The processor's output columns and their DDL types: times as epoch ms (converted to
        timestamps by the runner)."""
        fields = [("key", str(self.key_type))] if self.keyed else []
        fields += [("window_start", "bigint"), ("window_end", "bigint"), ("value", self.value_type),
                   ("timing", "string"), ("pane_index", "int"), ("is_first", "boolean"), ("is_last", "boolean"),
                   ("is_retraction", "boolean"), ("timestamp", "bigint")]
        if self.fired_by:
            fields += [("fired_by", "string"), ("firing_watermark", "bigint"), ("held_back_by", "string")]
        fields += [(name, _SIDE_TYPES[name]) for name in self.side_columns]
        fields += [(PHASE_COLUMN, "int")] + [(name, "bigint") for name in COUNT_COLUMNS]
        if self.reports_watermark:
            fields += [(WATERMARK_COLUMN, "bigint"), (HELD_BY_COLUMN, "string"), (HELD_LAG_COLUMN, "bigint")]
        return fields + [(EVENT_TIME_COLUMN, "timestamp")] if self.event_time_output else fields

    @property
    def stage_column(self) -> bool:
        """Whether the output tags side rows with the stage that kept them (a chained stage's)."""
        return self.side_outputs and self.stage is not None

    @property
    def side_columns(self) -> list[str]:
        """The output's side-row columns besides the key, in order (none without side outputs)."""
        if not self.side_outputs:
            return []
        return [*SIDE_OUTPUT_COLUMNS, *([INPUT_COLUMN] if self.input_column else []),
                *([STAGE_COLUMN] if self.stage_column else [])]

    def processor_schema(self) -> str:
        return ", ".join(f"{name} {type_name}" for name, type_name in self.processor_fields())

    @property
    def wakes_every_batch(self) -> bool:
        """Whether the key groups wake at every advance of the watermark, so that each knows the
        previous batch's watermark exactly: a chained stage takes its upstream's released panes there,
        and the event-time output compares its panes with it; and a stage handing its watermark on
        reports it from every group in every batch (``hands_on_watermark``), so that the next stage
        advances with it as the local chain does, quiet batches included."""
        return self.upstream is not None or self.event_time_output or self.hands_on_watermark

    @property
    def count_columns(self) -> list[str]:
        """The columns of the count rows (null on every other row)."""
        return COUNT_COLUMNS + (PARTITION_COUNT_COLUMNS if self.reports_watermark else [])


def build_plan(op: WindowingOptions, paths: Paths, *, time_mode: str, value_type: str, key_type: Optional[str],
               key_groups: int = 16, group_values: Optional[tuple[int, ...]] = None,
               clock: Union[SparkBatchClock, FileClock, None] = None, drop_counter: Any = None,
               state_encoding: str = "json", event_time_output: bool = False, side_rows: bool = False,
               **stage: Any) -> SparkPlan:
    """Every stage's plan (raw rows, a merge, a chained stage): what every stage derives the same way
    decided here once (the operator's side outputs, or the side rows it hands on: ``side_rows``; the
    default clock; the state layout of ``paths``' engine: ``paths.stage_layout``); what only one
    kind of stage has (its columns, a merge's names, a chained stage's upstream...) in ``stage``."""
    fed = stage.get("upstream") is not None
    paths = dataclasses.replace(paths, layout=stage_layout(op, paths.engine, fed=fed, time_mode=time_mode))
    return SparkPlan(
        operator=op, keyed=op.keyed, time_mode=time_mode, value_type=value_type, key_type=key_type,
        side_outputs=op.late_data_output or op.on_bad_element == "dead_letter" or side_rows,
        clock=clock or SparkBatchClock(), paths=paths, key_groups=key_groups, group_values=group_values,
        drop_counter=drop_counter, state_encoding=state_encoding, event_time_output=event_time_output, **stage)
