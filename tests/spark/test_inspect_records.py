"""``windowed-operator state`` prints each layout's records (no JVM: records built by the codecs)."""
import json

import pytest

pytest.importorskip("pyspark")

from windowed_operator.engine.columnar import ColumnarForm  # noqa: E402
from windowed_operator.state.records import (KeyPanes, KeyPanesCodec, KeySessions, KeySessionsCodec,  # noqa: E402
                                             KeyWindows, KeyWindowsCodec)
from windowed_operator.engine.columnar_triggers import NOT_SET  # noqa: E402
from windowed_operator.spark.inspect import describe_record  # noqa: E402


def record(state_data, due=(15, None)):
    return json.dumps({"state": state_data, "due": list(due)})


def test_session_rows_are_printed_with_their_bookkeeping():
    sessions = KeySessions(starts=[0, 40], ends=[15, 52], acc=[[3, 9]], pending=[0, 2], hold=[False, True],
                           nonspeculative=[1, 0], index=[1, 0], last=[3, None], late=[True, False], count=[0, 2],
                           closed=[False, False])
    lines = list(describe_record("u1", record(KeySessionsCodec(ColumnarForm("sum")).to_data(sessions))))
    assert lines == ["'u1': due at watermark 1970-01-01 00:00:00.015",
                     "  session [1970-01-01 00:00:00.000, 00:00:00.015) acc=[3] pending=0 panes fired=1 last_output=3 "
                     "trigger after its ON_TIME pane, 0 element(s) counted",
                     "  session [1970-01-01 00:00:00.040, 00:00:00.052) acc=[9] pending=2 panes fired=0 on_time_hold "
                     "trigger before its ON_TIME pane, 2 element(s) counted"]


def test_pane_rows_are_printed_with_late_counts():
    panes = KeyPanes(starts=[10], first_watermark=[4], acc=[[2.5]], late={20: 1})
    lines = list(describe_record(7, record(KeyPanesCodec().to_data(panes), due=(20, None))))
    assert lines == ["7: due at watermark 1970-01-01 00:00:00.020",
                     "  pane from 1970-01-01 00:00:00.010: acc=[2.5] first data at watermark 1970-01-01 00:00:00.004",
                     "  window ending 1970-01-01 00:00:00.020: 1 LATE pane(s) fired"]


def test_window_rows_are_printed_with_their_trigger_state():
    windows = KeyWindows(starts=[0, 10, 20], ends=[10, 20, 30], acc=[[0, 5, 2]], pending=[0, 1, 2],
                         hold=[False, False, True], nonspeculative=[1, 1, 0], index=[2, 1, 0], last=[7, 4, None],
                         late=[True, True, False], count=[0, 1, 2], fire_at=[NOT_SET, 1_700, NOT_SET],
                         closed=[True, False, False])
    lines = list(describe_record("u2", record(KeyWindowsCodec(ColumnarForm("sum")).to_data(windows), due=(30, 1_700))))
    assert lines == ["'u2': due at watermark 1970-01-01 00:00:00.030, processing time 1970-01-01 00:00:01.700",
                     "  window [1970-01-01 00:00:00.000, 00:00:00.010) acc=[0] pending=0 panes fired=2 last_output=7 "
                     "trigger finished",
                     "  window [1970-01-01 00:00:00.010, 00:00:00.020) acc=[5] pending=1 panes fired=1 last_output=4 trigger after its "
                     "ON_TIME pane, 1 element(s) counted, fires at processing time 1970-01-01 00:00:01.700",
                     "  window [1970-01-01 00:00:00.020, 00:00:00.030) acc=[2] pending=2 panes fired=0 on_time_hold "
                     "trigger before its ON_TIME pane, 2 element(s) counted"]


@pytest.mark.parametrize("packed_rows", [1, 10 ** 9], ids=["packed", "lists"])
def test_a_row_shard_is_printed_key_by_key(packed_rows, monkeypatch):
    """A row shard's text (many keys' rows as columns, packed or lists: state versions 9 and 8) prints
    each key's rows as its own record would."""
    from windowed_operator.state import row_columns_text
    from windowed_operator.state.records import SessionRecords
    from windowed_operator.engine.columnar_sessions import ColumnarSessions
    from windowed_operator.state.row_columns_text import rows_text
    from windowed_operator.spark.inspect import describe_row_shard
    from windowed_operator.windows.session_windows import SessionWindows
    from accumulations import Sum
    from triggers import TriggerOption

    engine = ColumnarSessions(SessionWindows(10), Sum(), TriggerOption.default(), 0, label="op", column=None)
    sessions = {"u1": KeySessions(starts=[0, 40], ends=[15, 52], acc=[[3, 9]], pending=[0, 2], hold=[False, True],
                                  nonspeculative=[1, 0], index=[1, 0], last=[3, None], late=[True, False],
                                  count=[0, 2], fire_at=[NOT_SET, NOT_SET], closed=[False, False]),
                ("t", 2): KeySessions(starts=[5], ends=[9], acc=[[1]], pending=[1], hold=[True], nonspeculative=[0],
                                      index=[0], last=[None], late=[False], count=[1], fire_at=[77], closed=[False])}
    table = SessionRecords(engine).build(list(sessions), list(sessions.values()), 0)
    monkeypatch.setattr(row_columns_text, "PACKED_ROWS", packed_rows)
    text = json.dumps([15, 77, json.loads(rows_text(table, "sessions"))])
    assert ('"u1:' in text) == (packed_rows == 1)
    by_key = list(describe_row_shard(3, 0, text))
    assert by_key[0] == ("row shard 3 (session rows): 2 key(s), due at watermark 1970-01-01 00:00:00.015, "
                         "processing time 1970-01-01 00:00:00.077")
    own = [line for k, s in sessions.items() for line in describe_record(
        k, record(KeySessionsCodec(ColumnarForm("sum")).to_data(s)))]
    assert [line.strip() for line in by_key[1:] if not line.startswith("  '") and not line.startswith("  (")] == \
        [line.strip() for line in own if not line.startswith("'") and not line.startswith("(")]
    assert list(describe_row_shard(3, 0, text, key="u1"))[1:] == ["  'u1':", *["  " + line for line in own[1:3]]]


def test_a_joins_window_log_part_is_printed_with_each_windows_inputs():
    """State version 8 keeps a join's inputs by column; the lines show them as the join holds them."""
    from accumulations import InnerJoin
    from accumulations.merge import SidedAccumulation
    from triggers import TriggerOption
    from windowed_operator import TimeWindows
    from windowed_operator.engine.core import WindowedCore
    from windowed_operator.spark.inspect import describe_window_part
    from windowed_operator.state.window_log import Partial, WindowLog
    from windowed_operator.windows.base import Window

    log = WindowLog(WindowedCore(TimeWindows(10), SidedAccumulation(inner=InnerJoin()), TriggerOption.default()))
    text = log.part_text([(7, Window(0, 10), Partial(([{"id": 7, "name": "Ann"}], [{"reserve": 5}]), 2)),
                          (8, Window(0, 10), Partial(([], [{"reserve": 6}]), 1))])
    assert list(describe_window_part(10, 0, text)) == [
        "windows expiring at watermark 1970-01-01 00:00:00.010 (part 0): 2 row(s)",
        "  7: [1970-01-01 00:00:00.000, 00:00:00.010) acc=([{'id': 7, 'name': 'Ann'}], [{'reserve': 5}]) elements=2",
        "  8: [1970-01-01 00:00:00.000, 00:00:00.010) acc=([], [{'reserve': 6}]) elements=1"]
    assert list(describe_window_part(10, 0, text, key="8"))[1:] == [
        "  8: [1970-01-01 00:00:00.000, 00:00:00.010) acc=([], [{'reserve': 6}]) elements=1"]


def test_the_keys_of_a_log_part_and_a_row_shard_are_counted():
    """``windowed-operator state`` counts the keys held in logs and row shards, not only per-key
    records (it said "0 key(s) with state" for a pane-log or row-shard checkpoint: issue 56)."""
    import numpy as np

    from accumulations import InnerJoin, Sum
    from accumulations.merge import SidedAccumulation
    from triggers import TriggerOption
    from windowed_operator import TimeWindows
    from windowed_operator.state.records import SessionRecords
    from windowed_operator.engine.columnar_sessions import ColumnarSessions
    from windowed_operator.engine.core import WindowedCore
    from windowed_operator.state.row_columns_text import rows_text
    from windowed_operator.spark.inspect import _part_keys
    from windowed_operator.state.window_log import Partial, WindowLog
    from windowed_operator.windows.base import Window
    from windowed_operator.windows.session_windows import SessionWindows

    log = WindowLog(WindowedCore(TimeWindows(10), SidedAccumulation(inner=InnerJoin()), TriggerOption.default()))
    text = log.part_text([(7, Window(0, 10), Partial(([{"id": 7}], []), 1)), (8, Window(0, 10), Partial(([], []), 1))])
    assert _part_keys("window log", {"rows": text, "due": 10}) == [7, 8]
    engine = ColumnarSessions(SessionWindows(10), Sum(), TriggerOption.default(), 0, label="op", column=None)
    one = KeySessions(starts=[0], ends=[9], acc=[[1]], pending=[1], hold=[True], nonspeculative=[0], index=[0],
                      last=[None], late=[False], count=[1], fire_at=[NOT_SET], closed=[False])
    table = SessionRecords(engine).build(["u1", ("t", 2)], [one, one], 0)
    shard = json.dumps([15, None, json.loads(rows_text(table, "sessions"))])
    assert _part_keys("row shards", {"rows": shard, "shard": 0}) == ["u1", ("t", 2)]
    from windowed_operator.state.codec import KeyStateCodec
    from windowed_operator.state.pane_log import part_text
    pane_part = part_text(np.array([0, 10, 10]), np.array([1, 0, 1]), np.array(["x", ("t", 3)], dtype=object),
                          [np.array([1, 2, 3])], KeyStateCodec().value)
    assert _part_keys("pane log", {"rows": pane_part, "bucket": 0}) == ["x", ("t", 3)]
    assert _part_keys("pane log", {"rows": json.dumps({"keys": ["y"], "acc": [[1]]}), "bucket": 0}) == ["y"]


def test_limit_counts_keys_not_lines():
    """``--limit N`` shows N keys, however many lines each takes, first the keys of their own records,
    then those of the logs and row shards (issue 58: it cut at N lines)."""
    from accumulations import InnerJoin, Sum
    from accumulations.merge import SidedAccumulation
    from triggers import TriggerOption
    from windowed_operator import TimeWindows
    from windowed_operator.state.records import SessionRecords
    from windowed_operator.engine.columnar_sessions import ColumnarSessions
    from windowed_operator.engine.core import WindowedCore
    from windowed_operator.state.row_columns_text import rows_text
    from windowed_operator.spark.inspect import _LOGS, describe_state
    from windowed_operator.state.window_log import Partial, WindowLog
    from windowed_operator.windows.base import Window
    from windowed_operator.windows.session_windows import SessionWindows

    two = KeySessions(starts=[0, 40], ends=[15, 52], acc=[[3, 9]], pending=[0, 2], hold=[False, True],
                      nonspeculative=[1, 0], index=[1, 0], last=[3, None], late=[True, False], count=[0, 2],
                      fire_at=[NOT_SET, NOT_SET], closed=[False, False])
    rows = [{"key_group": 0, "key": k, "record": record(KeySessionsCodec(ColumnarForm("sum")).to_data(two))}
            for k in ("u1", "u2")]
    log = WindowLog(WindowedCore(TimeWindows(10), SidedAccumulation(inner=InnerJoin()), TriggerOption.default()))
    part = log.part_text([(7, Window(0, 10), Partial(([{"id": 7}], []), 1)),
                          (7, Window(10, 20), Partial(([{"id": 7}], []), 1)),
                          (8, Window(0, 10), Partial(([], [{"reserve": 6}]), 1))])
    engine = ColumnarSessions(SessionWindows(10), Sum(), TriggerOption.default(), 0, label="op", column=None)
    shard = json.dumps([15, None, json.loads(rows_text(SessionRecords(engine).build(["s1", "s2"], [two, two], 0),
                                                       "sessions"))])
    found = {"pane log": [], "window log": [{"key_group": 0, "due": 10, "part": 0, "rows": part}],
             "row shards": [{"key_group": 0, "shard": 0, "part": 0, "rows": shard}]}
    logs = [(name, found[name], bucket, describe, note) for name, _, bucket, describe, note in _LOGS]

    def keys_shown(limit):
        lines = list(describe_state("cp", rows, 6, logs, None, limit))
        shown = [line.split(":")[0].strip() for line in lines
                 if line.startswith("'") or line.startswith("  7:") or line.startswith("  8:")
                 or line.startswith("  's")]
        return list(dict.fromkeys(shown)), lines

    shown, lines = keys_shown(3)
    assert shown == ["'u1'", "'u2'", "7"]  # key 7's two windows: one key
    assert lines[0] == "cp: 6 key(s) with state, the first 3:"
    assert lines[-1] == "... (3 more key(s): --limit 6 shows them all)"
    assert sum(line.startswith("  7:") for line in lines) == 2
    assert keys_shown(1)[0] == ["'u1'"]
    shown, lines = keys_shown(6)
    assert shown == ["'u1'", "'u2'", "7", "8", "'s1'", "'s2'"] and lines[0] == "cp: 6 key(s) with state:"
    assert not lines[-1].startswith("...")


def test_each_session_says_when_it_closes_and_each_shard_is_told_apart():
    """Per key, each open session with the watermark at which it closes (``time_rules.expiry_due``
    of its max timestamp and its group's allowed lateness), and row shards labelled by key group and
    kind: two groups' shard 0 printed the same "row shard 0" (issue 58)."""
    from accumulations import Sum
    from triggers import TriggerOption
    from windowed_operator.engine.columnar_sessions import ColumnarSessions
    from windowed_operator.spark.inspect import _LOGS, describe_state, group_lateness
    from windowed_operator.state.records import SessionRecords
    from windowed_operator.state.row_columns_text import rows_text
    from windowed_operator.windows.session_windows import SessionWindows

    def sessions(starts, ends):
        n = len(starts)
        return KeySessions(starts=starts, ends=ends, acc=[[1] * n], pending=[1] * n, hold=[True] * n,
                           nonspeculative=[0] * n, index=[0] * n, last=[None] * n, late=[False] * n, count=[1] * n,
                           fire_at=[NOT_SET] * n, closed=[False] * n)

    engine = ColumnarSessions(SessionWindows(10), Sum(), TriggerOption.default(), 0, label="op", column=None)

    def shard(key, state):
        return json.dumps([state.ends[0] - 1, None, json.loads(rows_text(
            SessionRecords(engine).build([key], [state], 0), "sessions"))])

    # the allowed lateness comes from each group's record (the fingerprint of the operator that wrote it)
    metas = [{"key_group": 1, "meta": json.dumps({"fingerprint": {"allowed lateness": "900000"}})},
             {"key_group": 4, "meta": json.dumps({"fingerprint": {"allowed lateness": "0"}})},
             {"key_group": 5, "meta": json.dumps({"watermark": 3})}]
    lateness = group_lateness(metas)
    assert lateness == {1: 900_000, 4: 0}
    own = [{"key_group": 5, "key": "u0", "record": record(KeySessionsCodec(ColumnarForm("sum")).to_data(
        sessions([0], [180_000])))}]
    found = {"pane log": [], "window log": [],
             "row shards": [{"key_group": 1, "shard": 0, "part": 0, "rows": shard("u1", sessions([0, 300_000],
                                                                                                  [180_000, 480_000]))},
                            {"key_group": 4, "shard": 0, "part": 0, "rows": shard("u2", sessions([60_000],
                                                                                                 [240_000]))}]}
    logs = [(name, found[name], bucket, describe, note) for name, _, bucket, describe, note in _LOGS]
    lines = list(describe_state("cp", own, 3, logs, None, 10, lateness))
    assert lines[0] == "cp: 3 key(s) with state:"
    # a group whose record does not say its lateness: the bounds only
    assert lines[2].startswith("  session [1970-01-01 00:00:00.000, 00:03:00.000) acc=[1]")
    assert lines[3] == ("the row shards: 2 shard(s) in 2 key group(s), 2 key(s) (each holds the rows of the keys whose "
                        "hash falls in it)")
    assert lines[4] == "key group 1, row shard 0 (session rows): 1 key(s), due at watermark 1970-01-01 00:02:59.999"
    assert lines[5] == "  'u1':"
    # [0, 3m) with 15m of allowed lateness: its max timestamp 2:59.999 + 15m, due one ms after
    assert lines[6].startswith("    session [1970-01-01 00:00:00.000, 00:03:00.000) closes at watermark "
                               "1970-01-01 00:18:00.000 acc=[1]"), lines[6]
    assert lines[7].startswith("    session [1970-01-01 00:05:00.000, 00:08:00.000) closes at watermark "
                               "1970-01-01 00:23:00.000 acc=[1]"), lines[7]
    assert lines[8] == "key group 4, row shard 0 (session rows): 1 key(s), due at watermark 1970-01-01 00:03:59.999"
    assert lines[10].startswith("    session [1970-01-01 00:01:00.000, 00:04:00.000) closes at watermark "
                                "1970-01-01 00:04:00.000 acc=[1]"), lines[10]
    assert len(lines) == 11, lines
    # the per-key record's sessions close by the same rule, given their group's lateness
    own[0]["key_group"] = 4
    assert list(describe_state("cp", own, 1, [], None, 10, lateness))[2].startswith(
        "  session [1970-01-01 00:00:00.000, 00:03:00.000) closes at watermark 1970-01-01 00:03:00.000 acc=[1]")
