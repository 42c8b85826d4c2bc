"""Reading a checkpoint's state: every key's windows (what is pending, what fired, trigger state),
or, under the default trigger with no allowed lateness, the pane log's rows of every pane and the
window log's accumulators of every window, or the session or window rows of every row shard.

The state is data (``spark.group_store``), so Spark's own state data source reads it; these
helpers give it columns with names and print it per key:

    windowed-operator state CHECKPOINT [--key K] [--limit 50]

or ``key_records(spark, checkpoint)`` for a DataFrame of ``key_group``, ``key`` and ``record`` (the
key's JSON record) to query yourself; ``pane_log_parts(spark, checkpoint)`` for the pane log's
``key_group``, ``pane_start``, ``part`` and ``rows`` (JSON: the keys and accumulator columns);
``window_log_parts(spark, checkpoint)`` for the window log's ``key_group``, ``due``, ``part`` and ``rows``;
``row_shard_parts(spark, checkpoint)`` for the row shards' ``key_group``, ``shard``, ``part`` and ``rows``.
"""
from __future__ import annotations

import json
from typing import Any, Collection, Iterator, Mapping, Optional

from ..engine.columnar_triggers import NOT_SET
from ..state.codec import KeyStateCodec
from ..state.group_state import read_record
from ..state.layouts import KEY_SHARDS, PANE_LOG, ROW_SHARDS, WINDOW_LOG
from ..state.pane_log import part_rows
from ..state.records import _ROW_COLUMNS, PANES, stored_columns
from ..state.row_columns_text import column_values
from ..state.window_log import part_accs
from ..time import shown_time, time_text
from ..time_rules import expiry_due
from ..windows.base import Window
from .plan import GROUP_COLUMN
from .worker.group_store import DUE_STATE, KEYS_STATE, META_STATE


def _when(ms: Optional[int]) -> str:
    return "never" if ms is None else time_text(int(ms))


def _interval(start: int, end: int) -> str:
    """A window's bounds, ``[start, end)`` in UTC; the end without its date when the start has it."""
    first, last = _when(start), _when(end)
    if first[:11] == last[:11] and first[:4].isdigit():
        last = last[11:]
    return f"[{first}, {last})"


def _closes(start: int, end: int, allowed_lateness: Optional[int]) -> str:
    """When the window ``[start, end)`` closes: the watermark at which it expires (``time_rules``) and
    its state is dropped; beyond the times a timestamp holds, only the end of input gets there.  Empty
    when the allowed lateness is not known."""
    if allowed_lateness is None:
        return ""
    due = expiry_due(Window(start, end).max_timestamp, allowed_lateness)
    return " closes " + (f"at watermark {time_text(due)}" if shown_time(due) is not None else "at the end of input")


def group_lateness(metas: Any) -> dict[Any, int]:
    """Each key group's allowed lateness (ms), from its record's fingerprint (``group_records``'
    rows: ``key_group``, ``meta``); a group whose record does not say is left out."""
    found = {}
    for row in metas:
        try:
            found[row["key_group"]] = int(json.loads(row["meta"])["fingerprint"]["allowed lateness"])
        except (TypeError, ValueError, KeyError):
            continue
    return found


def _shown(k: Any, key: Optional[str], only: Optional[Collection[str]]) -> bool:
    """Whether key ``k`` is shown: it is ``key`` (compared as text), and among ``only`` (reprs) if given."""
    return (key is None or str(k) == key) and (only is None or repr(k) in only)


def _due(event_due: Optional[int], processing_due: Optional[int]) -> str:
    return f"due at watermark {_when(event_due)}" + (
        f", processing time {_when(processing_due)}" if processing_due is not None else "")


def key_records(spark: Any, checkpoint: str, operator_id: int = 0) -> Any:
    """The per-key records of the operator's state in ``checkpoint`` (its latest committed batch):
    those in their own entries and those in key shards (``windowed_operator.state.key_shards``), with the
    key as text (a shard holds it as JSON: a string key unquoted, others as their JSON)."""
    from pyspark.sql import functions as F

    df = (spark.read.format("statestore").option("operatorId", operator_id).option("stateVarName", KEYS_STATE)
          .load(checkpoint))
    own = df.select(F.col(f"key.{GROUP_COLUMN}").alias("key_group"), F.col("user_map_key.key").cast("string").alias("key"),
                    F.col("user_map_value.record").alias("record"))
    pairs = shard_pairs(_log_parts(spark, checkpoint, operator_id, KEY_SHARDS.domain, "shard"))
    return own.unionByName(pairs.select("key_group", F.col("pair")[0].alias("key"), F.col("pair")[1].alias("record")))


def shard_pairs(shards: Any) -> Any:
    """(key_group, pair: [key, record]) for each key of the shard texts in column ``rows``: lines
    "<key JSON>\t<record>" or, written before lines, a JSON array of the pairs.  The key's JSON read
    as a string gives a string key unquoted and any other key as its JSON, in both forms."""
    from pyspark.sql import functions as F

    def line_pair(line: Any) -> Any:
        fields = F.split(line, "\t", 2)
        return F.array(F.from_json(F.concat(F.lit("["), fields[0], F.lit("]")), "array<string>")[0], fields[1])

    return shards.select("key_group", F.explode(
        F.when(F.col("rows").startswith("[["), F.from_json("rows", "array<array<string>>"))
        .otherwise(F.transform(F.split("rows", "\n"), line_pair))).alias("pair"))


def _log_parts(spark: Any, checkpoint: str, operator_id: int, domain: str, bucket: str) -> Any:
    from pyspark.sql import functions as F

    df = (spark.read.format("statestore").option("operatorId", operator_id).option("stateVarName", DUE_STATE)
          .load(checkpoint))
    return df.where(F.col("user_map_key.domain") == domain).select(
        F.col(f"key.{GROUP_COLUMN}").alias("key_group"), F.col("user_map_key.bucket").alias(bucket),
        F.col("user_map_key.part").alias("part"), F.col("user_map_value.entries").alias("rows"))


def pane_log_parts(spark: Any, checkpoint: str, operator_id: int = 0) -> Any:
    """The pane log's parts (``windowed_operator.state.pane_log``): each the rows some batch added to the
    panes of one bucket (``bucket``: where the window's length of panes it holds starts; before state
    version 10, one pane's)."""
    return _log_parts(spark, checkpoint, operator_id, PANE_LOG.domain, "bucket")


def window_log_parts(spark: Any, checkpoint: str, operator_id: int = 0) -> Any:
    """The window log's parts (``windowed_operator.state.window_log``): the accumulators some batches added
    to the windows that expire at watermark ``due``."""
    return _log_parts(spark, checkpoint, operator_id, WINDOW_LOG.domain, "due")


def row_shard_parts(spark: Any, checkpoint: str, operator_id: int = 0) -> Any:
    """The row shards' texts (``windowed_operator.state.row_shards``): each the session or window rows of
    many keys, as columns."""
    return _log_parts(spark, checkpoint, operator_id, ROW_SHARDS["sessions"].domain, "shard")


def describe_part(bucket: int, part: int, text: str, key: Optional[str] = None,
                  only: Optional[Collection[str]] = None) -> Iterator[str]:
    """Lines for one part of the pane log: its bucket and each row (key, pane, accumulator columns)."""
    rows = part_rows(text, bucket)
    columns = [column.tolist() for column in rows.acc]
    shown = [i for i, code in enumerate(rows.codes.tolist()) if _shown(rows.keys[code], key, only)]
    if shown:
        yield f"panes from {_when(bucket)} (part {part}): {len(rows.codes)} row(s)"
    for i in shown:
        yield (f"  {rows.keys[int(rows.codes[i])]!r}: pane from {_when(int(rows.starts[i]))}, "
               f"acc={[column[i] for column in columns]!r}")


def describe_window_part(due: int, part: int, text: str, key: Optional[str] = None,
                         only: Optional[Collection[str]] = None) -> Iterator[str]:
    """Lines for one part of the window log: the windows due at ``due`` and each (key, window)'s
    accumulator and element count."""
    data = json.loads(text)
    read = KeyStateCodec().read_value
    keys = [read(k) for k in data["k"]]
    shown = [i for i, k in enumerate(keys) if _shown(k, key, only)]
    if shown:
        yield f"windows expiring at watermark {_when(due)} (part {part}): {len(keys)} row(s)"
        accs = part_accs(read, data)
    for i in shown:
        yield f"  {keys[i]!r}: {_interval(data['s'][i], data['e'][i])} acc={accs[i]!r} elements={data['n'][i]}"


def group_records(spark: Any, checkpoint: str, operator_id: int = 0) -> Any:
    """Each key group's own record: fingerprint, watermark applied, timer, due-index buckets."""
    from pyspark.sql import functions as F

    df = (spark.read.format("statestore").option("operatorId", operator_id).option("stateVarName", META_STATE)
          .load(checkpoint))
    return df.select(F.col(f"key.{GROUP_COLUMN}").alias("key_group"), F.col("value.meta").alias("meta"))


def state_partitions(spark: Any, checkpoint: str) -> int:
    """The state partitions of the checkpoint's newest batch (its offsets entry's
    ``spark.sql.shuffle.partitions``: Spark keeps it, whatever later sessions set)."""
    from .base.checkpoint_record import log_entries

    offsets = log_entries(checkpoint, "offsets", spark)
    if not offsets:
        raise ValueError(f"checkpoint {checkpoint}: no batch in its offsets log")
    location = f"{checkpoint.rstrip('/')}/offsets/{max(offsets)}"
    for line in spark.sparkContext.textFile(location).collect()[1:]:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and "spark.sql.shuffle.partitions" in entry.get("conf", {}):
            return int(entry["conf"]["spark.sql.shuffle.partitions"])
    raise ValueError(f"checkpoint {checkpoint}: batch {max(offsets)}'s offsets name no state partitions")


def key_groups_of(spark: Any, checkpoint: str, metas: Any = None) -> Optional[tuple[int, bool]]:
    """The query's key groups and whether they are balanced over the partitions of its first start
    (``driver.key_groups``): from the checkpoint's record, else from its groups' fingerprints
    (``metas``: ``group_records`` rows, read if not given); None where neither says."""
    from .driver.key_groups import recorded_key_groups

    kept = recorded_key_groups(checkpoint, spark)
    if kept is not None:
        return kept.count, kept.values is not None
    try:
        rows = metas if metas is not None else group_records(spark, checkpoint).limit(1).collect()
        counts = {json.loads(row["meta"])["fingerprint"]["key groups"] for row in rows}
    except Exception:  # (not this library's checkpoint, or no group state yet: not known)
        return None
    return (int(counts.pop()), False) if len(counts) == 1 else None


def placement_line(partitions: int, key_groups: Optional[tuple[int, bool]]) -> str:
    """How the key groups lie over the state partitions, for a reader."""
    if key_groups is None:
        return f"state partitions: {partitions}"
    count, balanced = key_groups
    how = "placed by Spark's hash of their values, balanced over the partitions of the query's first start" \
        if balanced else "placed by Spark's hash of the group number"
    idle = f"; {partitions - count} partition(s) hold no state" if partitions > count else ""
    return f"key groups: {count} over {partitions} state partitions ({how}){idle}"


def describe_record(key: Any, text: str, allowed_lateness: Optional[int] = None) -> Iterator[str]:
    """Lines for one key: its windows (object path), pane rows or session/window rows (columnar paths);
    with ``allowed_lateness`` (its group's), when each window or session closes."""
    state, (event_due, processing_due) = read_record(json.loads(text))
    read = KeyStateCodec().read_value
    due = _due(event_due, processing_due)
    yield f"{key!r}: {due}"
    if isinstance(state, dict) and "windows" in state:
        yield from _describe_windows(state, read, allowed_lateness)
        return
    columns = stored_columns(state)
    if columns["kind"] == PANES:
        for i, start in enumerate(columns["starts"]):
            yield (f"  pane from {_when(start)}: acc={[read(column[i]) for column in columns['acc']]!r} first data "
                   f"at watermark {_when(columns['first_watermark'][i])}")
        for end, n in columns["late"]:
            yield f"  window ending {_when(end)}: {n} LATE pane(s) fired"
        return
    yield from _describe_rows(columns, read, allowed_lateness)


def _describe_rows(columns: dict, read: Any, allowed_lateness: Optional[int] = None) -> Iterator[str]:
    """One key's session or window rows, from named columns (``stored_columns``)."""
    name = "window" if columns["kind"] == "windows" else "session"
    for i, (start, end) in enumerate(zip(columns["starts"], columns["ends"])):
        fired = columns["index"][i]
        phase = "after its ON_TIME pane" if columns["late"][i] else "before its ON_TIME pane"
        fire_at = columns["fire_at"][i]
        trigger = (" trigger finished" if columns["closed"][i] else
                   f" trigger {phase}, {columns['count'][i]} element(s) counted"
                   + (f", fires at processing time {_when(fire_at)}" if fire_at != NOT_SET else ""))
        yield (f"  {name} {_interval(start, end)}{_closes(start, end, allowed_lateness)} acc={[read(column[i]) for column in columns['acc']]!r} "
               f"pending={columns['pending'][i]} panes fired={fired}"
               + (f" last_output={read(columns['last'][i])!r}" if fired else "")
               + (" on_time_hold" if columns["hold"][i] else "") + trigger)


def describe_row_shard(shard: int, part: int, text: str, key: Optional[str] = None,
                       only: Optional[Collection[str]] = None, key_group: Any = None,
                       allowed_lateness: Optional[int] = None) -> Iterator[str]:
    """Lines for one row shard (``windowed_operator.state.row_shards``): which it is (shard numbers
    count within a key group), what rows it holds and its due times, then each key's session or
    window rows, with when each closes given the group's ``allowed_lateness``."""
    event_due, processing_due, (kind, keys, lengths, *values) = json.loads(text)
    read = KeyStateCodec().read_value
    names = [*_ROW_COLUMNS, "acc", "last"]
    stored = dict(zip(names, values))
    shown = [(i, read(k)) for i, k in enumerate(keys) if _shown(read(k), key, only)]
    if shown:
        group = f"key group {key_group}, " if key_group is not None else ""
        rows = "window" if kind == "windows" else "session"
        yield f"{group}row shard {shard} ({rows} rows): {len(keys)} key(s), {_due(event_due, processing_due)}"
    bounds = [0]
    for n in lengths:
        bounds.append(bounds[-1] + n)
    rows_held = bounds[-1]
    every = {name: column_values(stored[name], rows_held) for name in _ROW_COLUMNS} if shown else {}
    acc = [column_values(column, rows_held) for column in stored["acc"]] if shown else []
    last = column_values(stored["last"], rows_held) if shown else []
    for i, k in shown:
        lo, hi = bounds[i], bounds[i + 1]
        columns = {name: values[lo:hi] for name, values in every.items()}
        columns.update(kind=kind, acc=[column[lo:hi] for column in acc], last=last[lo:hi])
        yield f"  {k!r}:"
        for line in _describe_rows(columns, read, allowed_lateness):
            yield "  " + line


def _describe_windows(state: dict, read: Any, allowed_lateness: Optional[int] = None) -> Iterator[str]:
    """The object path's windows (``state_codec``) and element buffer."""
    for window in state["windows"]:
        flags = [name for name in ("fired", "closed", "on_time_hold") if window.get(name)]
        start, end = window["start"], window["end"]
        yield (f"  {_interval(start, end)}{_closes(start, end, allowed_lateness)} acc={read(window['acc'])!r} pane_index="
               f"{window.get('pane_index', 0)} pending={window.get('pending', 0)}"
               + (f" last_output={read(window.get('last_output'))!r}" if window.get("fired") else "")
               + (f" trigger_state={read(window['trigger_state'])!r}" if "trigger_state" in window else "")
               + (f" timers={window['timers']}" if "timers" in window else "")
               + (f" {' '.join(flags)}" if flags else ""))
    if "buffer" in state:
        yield f"  element buffer: {len(state['buffer'])} timestamps"


def _part_keys(name: str, part: Any) -> list[Any]:
    """The keys one part of a log or one row shard (a row of ``pane_log_parts`` and the like) holds rows of."""
    if name == PANE_LOG.name:
        return part_rows(part["rows"], part["bucket"]).keys
    data = json.loads(part["rows"])
    stored = data["k"] if name == WINDOW_LOG.name else data[2][1]
    read = KeyStateCodec().read_value
    return [read(k) for k in stored]


_LOGS = ((PANE_LOG.name, pane_log_parts, "bucket", describe_part, "a key's rows of a pane may span parts: they are "
          "summed when read"),
         (WINDOW_LOG.name, window_log_parts, "due", describe_window_part, "a key's window may span parts: they are "
          "merged when read"),
         ("row shards", row_shard_parts, "shard", describe_row_shard, "each holds the rows of the keys whose hash "
          "falls in it"))


def describe_checkpoint(spark: Any, checkpoint: str, key: Optional[str] = None, limit: int = 50,
                        operator_id: int = 0) -> Iterator[str]:
    df = key_records(spark, checkpoint, operator_id)
    if key is not None:
        df = df.where(df.key.cast("string") == key)
    rows = df.orderBy("key_group", "key").limit(limit + 1).collect()
    records = df.count()
    logs = [(name, parts(spark, checkpoint, operator_id).orderBy(bucket, "part", "key_group").collect(), bucket,
             describe, note) for name, parts, bucket, describe, note in _LOGS]
    # keys held in logs or row shards (a key's rows may span parts: each key counted once)
    held = {(part["key_group"], repr(k)) for name, found, *_ in logs for part in found
            for k in _part_keys(name, part) if key is None or str(k) == key}
    metas = group_records(spark, checkpoint, operator_id).collect()
    yield from describe_state(checkpoint, rows, records + len(held), logs, key, limit, group_lateness(metas))
    yield placement_line(state_partitions(spark, checkpoint), key_groups_of(spark, checkpoint, metas))


def describe_state(checkpoint: str, rows: list, total: int, logs: list, key: Optional[str],
                   limit: int, lateness: Optional[Mapping[Any, int]] = None) -> Iterator[str]:
    """The lines of ``describe_checkpoint`` from what it read: the first ``limit`` per-key records
    (``rows``, each with ``key_group``, ``key`` and ``record``), then the logs' parts and row shards
    (``logs``: name, parts, bucket column, describe function, note) showing the rows of the first keys
    there, up to ``limit`` keys in all; ``total`` keys hold state.  ``lateness``: each key group's
    allowed lateness, for when its windows close."""
    lateness = lateness or {}
    yield f"{checkpoint}: {total} key(s) with state" + (f", the first {limit}:" if total > limit else ":")
    for row in rows[:limit]:
        yield from describe_record(row["key"], row["record"], lateness.get(row["key_group"]))
    # the rest of the --limit keys from the logs and row shards, in the order they appear there
    only: dict[str, None] = {}
    budget = max(0, limit - len(rows[:limit]))
    for name, found, *_ in logs:
        for part in found:
            for k in _part_keys(name, part):
                if len(only) < budget and _shown(k, key, None):
                    only.setdefault(repr(k))
    for name, found, bucket, describe, note in logs:
        parts = [part for part in found if any(repr(k) in only for k in _part_keys(name, part))]
        if found and name == "row shards":
            in_shards = sum(len(_part_keys(name, part)) for part in found)
            groups = len({part["key_group"] for part in found})
            yield f"the {name}: {len(found)} shard(s) in {groups} key group(s), {in_shards} key(s) ({note})"
        elif found:
            yield f"the {name}: {len(found)} part(s) ({note})"
        for part in parts:
            shard = {"key_group": part["key_group"], "allowed_lateness": lateness.get(part["key_group"])} \
                if name == "row shards" else {}
            yield from describe(part[bucket], part["part"], part["rows"], key, only, **shard)
    if total > limit:
        yield f"... ({total - limit} more key(s): --limit {total} shows them all)"
