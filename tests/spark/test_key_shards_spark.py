"""Key shards on Spark: per-key layouts keep their records many keys to a text and give the local
runner's panes; a restart keeps them there whatever the checkpointing settings (a checkpoint that
holds records in entries of their own moves them in: the ``*_unsharded`` fixtures, test_state_versions)."""
import re
from collections import Counter
from datetime import datetime, timedelta

import pytest

from accumulations import Count, ToList
from triggers import TriggerOption
from windowed_operator import KeyedWindowedOperator, SessionWindows, TimeWindows, bounded_disorder

from .harness import (BASE, END_COLUMN, MARKED_SCHEMA, local_panes, pane_tuple, release_batches, run_local_like_spark,
                      run_spark, spark_panes, write_batches)
from .test_pane_log_spark import BATCHES, DELAY, _file_sink, rows

pytestmark = pytest.mark.spark


def sessions_early(**kw):
    """Nexmark q11's shape: sessions, an early pane every 2 elements, allowed lateness (columnar rows)."""
    trigger = TriggerOption.at_watermark().with_early_firings_at_every(count=2).with_late_firings_at_every(count=1)
    return KeyedWindowedOperator(SessionWindows(4_000), Count(), key="user", timestamp="ts",
                                 watermark=bounded_disorder(DELAY), allowed_lateness=3_000,
                                 trigger=trigger.accumulating_and_retracting_fired_panes(), **kw)


def tumbling_counts(**kw):
    """The pane table with allowed lateness: per-key pane rows (session and window rows are in row
    shards, whose keys are not in key shards)."""
    return KeyedWindowedOperator(TimeWindows(10_000), Count(), key="user", timestamp="ts",
                                 watermark=bounded_disorder(DELAY), allowed_lateness=4_000, **kw)


def tumbling_lists(**kw):
    """The object path's windows (a list accumulation), with allowed lateness: per-key windows."""
    return KeyedWindowedOperator(TimeWindows(10_000), ToList("amount"), key="user", timestamp="ts",
                                 watermark=bounded_disorder(DELAY), allowed_lateness=4_000, **kw)


def stored(spark, checkpoint, rows=False):
    """(keys in their own entries, keys in key shards[, keys in row shards]) of the checkpoint's
    latest batch."""
    import json

    from windowed_operator.state.key_shards import parse_shard
    from windowed_operator.spark.worker.group_store import DUE_STATE, KEYS_STATE

    own = spark.read.format("statestore").option("stateVarName", KEYS_STATE).load(str(checkpoint)).count()
    parts = spark.read.format("statestore").option("stateVarName", DUE_STATE).load(str(checkpoint)).collect()
    in_shards = sum(len(parse_shard(r["user_map_value"]["entries"])) for r in parts
                    if r["user_map_key"]["domain"] == "keys")
    in_rows = sum(len(json.loads(r["user_map_value"]["entries"])[2][1]) for r in parts
                  if r["user_map_key"]["domain"] == "rows")
    return (own, in_shards, in_rows) if rows else (own, in_shards)


@pytest.mark.parametrize("make_op", [tumbling_counts, tumbling_lists], ids=["columnar panes", "object windows"])
def test_key_shards_give_the_local_runners_panes(spark, tmp_path, make_op):
    op = make_op()
    expected = local_panes(run_local_like_spark(op, BATCHES, DELAY))
    assert spark_panes(run_spark(spark, op, BATCHES, tmp_path / "ended")) == expected

    checkpoint = run_open(spark, tmp_path, make_op)
    own, in_shards = stored(spark, checkpoint)
    assert own == 0 and in_shards > 0
    from windowed_operator.spark.inspect import key_records

    assert sorted(r["key"] for r in key_records(spark, str(checkpoint)).collect()) == sorted(
        {r["user"] for batch in BATCHES for r in batch if r["ts"] >= BASE + 20_000})


def run_open(spark, tmp_path, make_op):
    """The batches without the end-of-input marker's effect (windows still open): the checkpoint."""
    write_batches(tmp_path / "open" / "in", BATCHES, flush=False)
    df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / "open" / "in"))
    checkpoint = tmp_path / "open" / "checkpoint"
    query = (make_op().apply(df, end_of_input=END_COLUMN).writeStream.format("noop")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    return checkpoint


def test_row_shards_give_the_local_runners_panes(spark, tmp_path):
    """Session rows in row shards by default: the local runner's panes, no per-key record, and the
    state command prints every key's rows."""
    op = sessions_early()
    expected = local_panes(run_local_like_spark(op, BATCHES, DELAY))
    assert spark_panes(run_spark(spark, op, BATCHES, tmp_path / "ended")) == expected
    checkpoint = run_open(spark, tmp_path, sessions_early)
    own, in_shards, in_rows = stored(spark, checkpoint, rows=True)
    assert own == 0 and in_shards == 0 and in_rows > 0
    from windowed_operator.spark.inspect import describe_checkpoint

    lines = list(describe_checkpoint(spark, str(checkpoint), limit=1000))
    held = sorted({r["user"] for batch in BATCHES for r in batch if r["ts"] >= BASE + 20_000})
    assert any(line.startswith("the row shards:") and f"{in_rows} key(s)" in line for line in lines)
    assert lines[0].endswith(f": {in_rows} key(s) with state:")  # (not the per-key records' 0: issue 56)
    assert sorted(line.strip()[:-1] for line in lines if line.startswith("  '")) == sorted(repr(k) for k in held)
    # each shard labelled apart (shard numbers count within a key group), each session with when it
    # closes: once the watermark reaches its end plus the allowed lateness (3 s), in UTC as its bounds
    labels = [line.split(":")[0] for line in lines if "row shard" in line and not line.startswith("the ")]
    assert labels and all(label.startswith("key group ") for label in labels)
    assert len(set(labels)) == len(labels), labels
    sessions = [line for line in lines if line.startswith("    session [")]
    assert len(sessions) >= len(held)
    for line in sessions:
        match = re.match(r"    session \[(\S+) (\S+), (\S+ )?(\S+)\) closes at watermark (\S+ \S+) ", line)
        assert match is not None, line
        end = datetime.fromisoformat(f"{(match[3] or match[1]).strip()} {match[4]}")
        assert datetime.fromisoformat(match[5]) - end == timedelta(seconds=3), line


def test_inspection_reads_a_shards_keys_in_both_forms(spark):
    """Lines and, written before lines, a JSON array of pairs: the same keys and records, string keys
    unquoted (with the characters lines are split on), other keys as their tagged JSON."""
    import json

    from windowed_operator.state.key_shards import key_json, shard_text
    from windowed_operator.spark.inspect import shard_pairs
    from windowed_operator.state.codec import KeyStateCodec

    records = {"a\tb": '{"n":1}', 'q"\n': '{"n":2}', 7: '{"n":[3,"\\t"]}', (1, "x"): "{}"}
    lines = shard_text({key_json(k): text for k, text in records.items()})
    pairs = json.dumps([[KeyStateCodec().value(k), text] for k, text in records.items()])
    df = spark.createDataFrame([(0, lines), (1, pairs)], "key_group int, rows string")
    got = [(r["key_group"], r["pair"][0], r["pair"][1]) for r in shard_pairs(df).collect()]
    expected = [("a\tb", '{"n":1}'), ('q"\n', '{"n":2}'), ("7", '{"n":[3,"\\t"]}'), ('["t",[1,"x"]]', "{}")]
    assert sorted(got) == sorted((group, *pair) for group in (0, 1) for pair in expected)


#: Sessions across restarts: a query per step, each releasing more of these batches.
RESTART_BATCHES = [rows(("a", 1, 1_000), ("b", 2, 2_000), ("a", 3, 3_500)),
                   rows(("b", 4, 6_000), ("c", 5, 7_000), ("a", 1, 2_500)),
                   rows(("a", 6, 9_000), ("b", 7, 15_000), ("c", 1, 8_000)),
                   rows(("c", 8, 21_000), ("a", 9, 27_000))]


def run_restarts(spark, tmp_path, steps, make_op=tumbling_counts):
    """``make_op``'s operator over ``RESTART_BATCHES`` on one checkpoint, a query per step ``(settings,
    files released)`` (None: all, with the end-of-input marker) with the session's settings set while
    it runs; yields the checkpoint after each step; the panes are checked against the local runner
    at the end."""
    source, checkpoint, store = tmp_path / "in", tmp_path / "checkpoint", {}
    staged = write_batches(tmp_path / "staging", RESTART_BATCHES)
    source.mkdir()
    for settings, upto in steps:
        before = {name: spark.conf.get(name, None) for name in settings}
        release_batches(tmp_path / "staging", source, len(staged) if upto is None else upto)
        df = spark.readStream.schema(MARKED_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
        try:
            for name, value in settings.items():
                spark.conf.set(name, value)
            query = (make_op().apply(df, end_of_input=END_COLUMN).writeStream.foreachBatch(_file_sink(store))
                     .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
            query.awaitTermination()
        finally:
            for name, value in before.items():
                spark.conf.unset(name) if value is None else spark.conf.set(name, value)
        yield checkpoint
    got = Counter(pane_tuple(r) for rows_ in store.values() for r in rows_ if r.get("record_type", "pane") == "pane")
    assert got == local_panes(run_local_like_spark(make_op(), RESTART_BATCHES, DELAY))


def test_a_restart_that_switches_changelog_checkpointing_keeps_every_record(spark, tmp_path):
    """RocksDB's changelog checkpointing, which ``local_session`` turns on: a checkpoint written with
    it off (as before) continues with it on, and back; and so does the checkpoint file manager
    ``local_session`` names (files renamed with the FileSystem API) against Spark's default
    (FileContext).  One restart test for both: each restart costs a query start.  The records stay in
    key shards throughout."""
    from windowed_operator.spark.base.session import (CHECKPOINT_MANAGER_CONF, FILE_SYSTEM_CHECKPOINT_MANAGER,
                                                      SPARK_DEFAULT_CHECKPOINT_MANAGER as spark_default)

    changelog = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
    assert spark.conf.get(changelog) == "true"
    assert spark.conf.get(CHECKPOINT_MANAGER_CONF) == FILE_SYSTEM_CHECKPOINT_MANAGER
    steps = [({changelog: "false", CHECKPOINT_MANAGER_CONF: spark_default}, 1),
             ({changelog: "true", CHECKPOINT_MANAGER_CONF: FILE_SYSTEM_CHECKPOINT_MANAGER}, 3),
             ({changelog: "false", CHECKPOINT_MANAGER_CONF: spark_default}, None)]
    # (in key shards while windows are open; the last run's end of input closes them all)
    checks = [lambda own, in_shards: own == 0 and in_shards > 0, lambda own, in_shards: own == 0 and in_shards > 0,
              lambda own, in_shards: own == 0 and in_shards == 0]
    for checkpoint, check in zip(run_restarts(spark, tmp_path, steps), checks):
        assert check(*stored(spark, checkpoint))
    assert any(checkpoint.glob("state/**/*.changelog"))  # (the middle run wrote its batches so)
