"""A pipeline's checkpoints record the native stages setting they started with; a rerun takes it."""
import io
import json
import textwrap
from collections import Counter

import pytest

from windowed_operator.pipeline import parse_pipeline
from windowed_operator.spark import END_OF_INPUT
from windowed_operator.spark.driver.checkpoint_settings import (MARKER, CheckpointSettingError, native_stages_setting,
                                                         record)
from windowed_operator.spark.driver.native_stage import NATIVE_STAGES_CONF
from windowed_operator.spark.pipeline_run import run_pipeline

from .test_pipeline_run import ROWS

pytestmark = pytest.mark.spark


def _started(path, native=None):
    """A checkpoint Spark has written (an offset log), with the setting recorded before it started, or not."""
    if native is not None:
        record([str(path)], native)
    (path / "offsets").mkdir(parents=True, exist_ok=True)
    (path / "offsets" / "0").write_text("v1\n")
    record([str(path)], not native)  # (a started checkpoint keeps what it records, or nothing)
    return str(path)


def test_new_checkpoints_run_with_native_stages_and_record_it(tmp_path):
    locations = [str(tmp_path / "a"), f"file://{tmp_path / 'b'}"]
    assert native_stages_setting(locations, None) is True
    record(locations, True)
    assert json.loads((tmp_path / "a" / MARKER).read_text()) == {NATIVE_STAGES_CONF: True}
    assert json.loads((tmp_path / "b" / MARKER).read_text()) == {NATIVE_STAGES_CONF: True}
    assert native_stages_setting(locations, None) is True


def test_a_checkpoint_started_without_the_record_keeps_the_old_default(tmp_path):
    old = _started(tmp_path / "old")
    assert native_stages_setting([old, str(tmp_path / "new")], None) is False
    assert native_stages_setting([_started(tmp_path / "recorded", native=True)], None) is True
    # planned with the session's setting then, which a setting given now stands for
    assert native_stages_setting([old], True) is True and native_stages_setting([old], False) is False


def test_a_given_setting_wins_on_new_checkpoints_and_is_refused_against_a_started_one(tmp_path):
    assert native_stages_setting([str(tmp_path / "new")], False) is False
    started = _started(tmp_path / "run", native=True)
    assert native_stages_setting([started], True) is True
    with pytest.raises(CheckpointSettingError, match=rf"{NATIVE_STAGES_CONF}=false is given, but checkpoint "
                                                     rf"{started} was started with true"):
        native_stages_setting([started], False)


def test_checkpoints_that_disagree_are_refused_by_name(tmp_path):
    on, off = _started(tmp_path / "on", native=True), _started(tmp_path / "off", native=False)
    with pytest.raises(CheckpointSettingError, match=rf"{on} \(true\), {off} \(false\)"):
        native_stages_setting([on, off], None)


def test_a_checkpoint_on_another_file_system_is_not_read_and_keeps_the_setting_off(tmp_path):
    assert native_stages_setting(["s3a://bucket/ckpt", str(tmp_path / "new")], None) is False
    assert native_stages_setting(["s3a://bucket/ckpt"], True) is True
    record(["s3a://bucket/ckpt"], True)  # nothing written, nothing raised
    # a plain path on a cluster whose default file system is HDFS is not this machine's directory
    plain = str(tmp_path / "plain")
    assert native_stages_setting([plain], None, plain_paths_local=False) is False
    record([plain], False, plain_paths_local=False)
    assert not (tmp_path / "plain").exists()
    assert native_stages_setting([f"file://{plain}"], None, plain_paths_local=False) is True


def test_an_unreadable_record_names_the_checkpoint(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / MARKER).write_text(json.dumps({NATIVE_STAGES_CONF: "yes"}))
    with pytest.raises(CheckpointSettingError, match=r"records spark.windowed_operator.nativeStages='yes'"):
        native_stages_setting([str(tmp_path / "c")], None)


def _pipeline(tmp_path, rows):
    return parse_pipeline(textwrap.dedent(f"""
        name: totals
        checkpoint: {tmp_path / "checkpoints"}
        sources:
          payments:
            files: {{path: "{tmp_path / 'in'}", format: json,
                     schema: "user string, amount bigint, ts bigint, end_of_input boolean",
                     end_of_input: end_of_input, max_files_per_trigger: 1}}
        operators:
          - name: spend
            input: payments
            key: user
            timestamp: ts
            window: {{tumbling: {{size: 10s}}}}
            accumulation: {{sum: {{field: amount}}}}
            watermark: {{bounded_disorder: 20s}}
          - name: total
            input: spend
            accumulation: {{sum: {{}}}}
        sinks:
          - {{input: total, files: {{path: "{tmp_path / 'out'}", format: parquet}}}}
    """))


def _write(tmp_path, index, rows):
    (tmp_path / "in").mkdir(exist_ok=True)
    (tmp_path / "in" / f"part-{index}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))




def _aggregations(checkpoint) -> set:
    """The names of the checkpoint's stateful operators with version-1 metadata (Spark's own
    aggregations; a transformWithState writes version 2)."""
    return {json.loads(path.read_text().splitlines()[1])["operatorInfo"]["operatorName"]
            for path in checkpoint.glob("state/*/_metadata/metadata")}


def test_a_pipeline_rerun_resumes_its_checkpoint_with_the_setting_it_started_with(spark, tmp_path):
    """First run on a new checkpoint: native stages, recorded; the rerun, with more input, takes the
    record (a flip would be refused by Spark at its first batch), and its totals equal the local
    runner's over all the input."""
    _write(tmp_path, 0, ROWS[:4])
    first = _pipeline(tmp_path, ROWS[:4])
    run_pipeline(first, spark=spark, workdir=tmp_path / "work", out=io.StringIO())
    checkpoint = tmp_path / "checkpoints" / "total-0"
    kept = json.loads((checkpoint / MARKER).read_text())
    assert kept[NATIVE_STAGES_CONF] is True and kept["key_groups"] == 16  # (both stages' key groups too)
    assert "stateStoreSave" in _aggregations(checkpoint), "the second stage ran as Spark's aggregation"
    assert spark.conf.get(NATIVE_STAGES_CONF, None) is None, "the session's own setting is restored"

    _write(tmp_path, 1, [*ROWS[4:], {"end_of_input": True, "ts": END_OF_INPUT}])
    rerun = _pipeline(tmp_path, ROWS)
    run_pipeline(rerun, spark=spark, workdir=tmp_path / "work", out=io.StringIO())
    got = Counter((r["ws"], r["value"]) for r in spark.read.parquet(str(tmp_path / "out")).selectExpr(
        "unix_millis(window_start) as ws", "value").collect())
    from windowed_operator.testing import TestStream

    local = rerun.build_operators()["spend"].then(rerun.build_operators()["total"]).run_local(
        TestStream().add_elements(ROWS))
    assert got == Counter((p.window_start, p.value) for p in local)

    spark.conf.set(NATIVE_STAGES_CONF, "false")
    try:
        with pytest.raises(CheckpointSettingError, match=str(checkpoint)):
            run_pipeline(_pipeline(tmp_path, [1]), spark=spark, workdir=tmp_path / "work", out=io.StringIO())
    finally:
        spark.conf.unset(NATIVE_STAGES_CONF)
