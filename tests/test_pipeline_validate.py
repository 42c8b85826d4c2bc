"""``validate`` catches, with line and path, what used to surface only after Spark started: columns
not in the declared schema, a bad DDL type, duplicate YAML keys, a malformed trigger interval and a
files source with nothing to read."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from windowed_operator.cli import main
from windowed_operator.pipeline import PipelineError, load_pipeline, parse_pipeline
from windowed_operator.ddl import DDLError, parse_columns

PIPELINE = textwrap.dedent("""\
    name: clicks
    trigger_interval: 5 seconds
    sources:
      clicks:
        files: {path: data/clicks, format: json, schema: "user string, page string, amount bigint, ts bigint"}
      views:
        memory: {schema: "ad string, at bigint, done boolean", rows: [{ad: a, at: 1}], end_of_input: done}
    operators:
      - name: spend
        input: clicks
        key: user
        timestamp: ts
        window: {tumbling: {size: 1m}}
        accumulation: {sum: {field: amount}}
      - name: joined
        left: clicks
        right: views
        key: user
        timestamp: ts
        right_options: {key: ad, timestamp: at}
        window: {tumbling: {size: 1m}}
        accumulation: {inner_join: {}}
      - name: top
        input: spend
        key: key
        timestamp: timestamp
        accumulation: {max: {field: value}}
    sinks:
      - {input: top, console: {}}
    """)


def issues_of(text: str) -> list[str]:
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text)
    return [str(issue) for issue in info.value.issues]


def test_the_pipeline_is_valid():
    pipeline = parse_pipeline(PIPELINE)
    assert pipeline.trigger_interval == 5_000


def test_a_value_record_reaches_the_operator():
    text = PIPELINE.replace("accumulation: {max: {field: value}}", "value: {user: key, n: value}\n    accumulation: "
                                                                   "{to_list: {}}")
    pipeline = parse_pipeline(text)
    assert [op for op in pipeline.operators if op.name == "top"][0].value == {"user": "key", "n": "value"}


@pytest.mark.parametrize("old,new,expected", [
    ("key: user\n    timestamp: ts\n    window: {tumbling: {size: 1m}}\n    accumulation: {sum",
     "key: usr\n    timestamp: ts\n    window: {tumbling: {size: 1m}}\n    accumulation: {sum",
     "line 11: operators[0].key: column 'usr' is not in 'clicks' (columns: user, page, amount, ts)"),
    ("{sum: {field: amount}}", "{sum: {field: amt}}",
     "line 14: operators[0].accumulation: column 'amt' is not in 'clicks' (columns: user, page, amount, ts)"),
    ("right_options: {key: ad, timestamp: at}", "right_options: {key: ad, timestamp: time}",
     "line 20: operators[1].right_options.timestamp: column 'time' is not in 'views' (columns: ad, at, done)"),
    ("accumulation: {max: {field: value}}", "accumulation: {max: {field: total}}",
     "line 27: operators[2].accumulation: column 'total' is not in 'spend' (columns: key, window_start, "
     "window_end, value, timing, pane_index, index, is_first, is_last, is_retraction, timestamp)"),
    ("accumulation: {max: {field: value}}", "value: {user: key, n: vaule}\n    accumulation: {to_list: {}}",
     "line 27: operators[2].value.n: column 'vaule' is not in 'spend' (columns: key, window_start, "
     "window_end, value, timing, pane_index, index, is_first, is_last, is_retraction, timestamp)"),
    ("end_of_input: done", "end_of_input: finished",
     "line 7: sources.views.memory.end_of_input: column 'finished' is not in the schema (columns: ad, at, done)"),
])
def test_a_column_the_input_does_not_have(old, new, expected):
    assert old in PIPELINE
    assert issues_of(PIPELINE.replace(old, new, 1)) == [expected]


def test_a_bad_type_in_the_schema_names_the_column_and_the_closest_type():
    assert issues_of(PIPELINE.replace("page string", "page strng")) == [
        "line 5: sources.clicks.files.schema: column 'page': unknown type 'strng' (did you mean 'string'?)"]


def test_duplicate_keys_are_errors_not_silently_overwritten():
    text = PIPELINE.replace("    key: user\n    timestamp: ts\n    window: {tumbling",
                            "    key: user\n    key: page\n    timestamp: ts\n    window: {tumbling", 1)
    assert issues_of(text) == ["line 12: operators[0].key: duplicate key 'key' (first at line 11); only one may be "
                               "given"]


@pytest.mark.parametrize("interval,ms", [("5 seconds", 5_000), ("1 second", 1_000), ("250ms", 250),
                                         ("2 minutes", 120_000), ("1.5s", 1_500)])
def test_trigger_intervals_in_spark_or_library_units(interval, ms):
    assert parse_pipeline(PIPELINE.replace("5 seconds", interval)).trigger_interval == ms


def test_a_malformed_trigger_interval():
    assert issues_of(PIPELINE.replace("5 seconds", "5 parsecs")) == [
        "line 2: trigger_interval: duration '5 parsecs' is not a number with a unit (ms, s, m, h, d, or seconds, "
        "minutes...), e.g. '10s'"]


def test_a_files_source_with_nothing_to_read(tmp_path: Path, capsys):
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE)
    load_pipeline(path)  # the library itself does not require the data to exist yet
    with pytest.raises(PipelineError) as info:
        load_pipeline(path, require_inputs=True)
    assert [str(i) for i in info.value.issues] == [
        f"line 5: sources.clicks.files.path: '{tmp_path}/data/clicks' does not exist: nothing to read (the "
        "examples write their data with python examples/pipelines/run.py NAME)"]
    assert main(["validate", str(path)]) == 1
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "data" / "clicks").mkdir(parents=True)
    assert main(["validate", str(path)]) == 0


@pytest.mark.parametrize("ddl,columns", [
    ("user string, amount bigint", [("user", "string"), ("amount", "bigint")]),
    ("a DECIMAL(10,2), b varchar(3), c array<map<string, struct<x: int, y double>>>",
     [("a", "decimal(10, 2)"), ("b", "varchar(3)"), ("c", "array<map<string, struct<x: int, y: double>>>")]),
    ("`odd name` timestamp NOT NULL COMMENT 'when', d date", [("odd name", "timestamp"), ("d", "date")]),
    ("i interval day to second, n timestamp_ntz", [("i", "interval day to second"), ("n", "timestamp_ntz")]),
])
def test_ddl_columns(ddl, columns):
    assert parse_columns(ddl) == columns


@pytest.mark.parametrize("ddl,message", [
    ("user strng", "column 'user': unknown type 'strng' (did you mean 'string'?)"),
    ("a int, s struct<x: integr>", "column 's.x': unknown type 'integr' (did you mean 'integer'?)"),
    ("user string,", "the schema ends early"),
    ("a, b int", "column 'a' has no type"),
    ("a int b int", "expected ',', found 'b'"),
    ("a int, A string", "column 'A' is declared twice"),
    ("", "the schema has no columns"),
    ("a array<int", "the schema ends early"),
])
def test_ddl_errors(ddl, message):
    with pytest.raises(DDLError) as info:
        parse_columns(ddl)
    assert str(info.value) == message


def test_errors_of_every_check_are_reported_at_once(tmp_path: Path):
    """An unknown input, a column the input lacks, a path outside the directory and a files source
    with nothing to read: one report, in line order (not one check's errors per run)."""
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE.replace("right: views", "right: veiws").replace("field: amount", "field: amont")
                    .replace("name: clicks\n", "name: clicks\ncheckpoint: ../elsewhere\n", 1))
    with pytest.raises(PipelineError) as info:
        load_pipeline(path, require_inputs=True)
    issues = [str(i) for i in info.value.issues]
    assert [i.split(":")[1].strip() for i in issues] == [
        "checkpoint", "sources.clicks.files.path", "operators[0].accumulation", "operators[1].right"], issues


BAD_IN_EVERY_PHASE = textwrap.dedent("""\
    name: sessions
    sources:
      events:
        files: {path: data/events, format: json, schema: "user strng, amount bigint, ts bigint"}
    operators:
      - name: sessions
        input: events
        key: user
        timestamp: ts
        value: amount
        window: {sessions: {gap: 3 parsecs}}
        accumulation: {code: {path: wo_test_missing_module_58.MyAcc}}
    sinks:
      - {input: sessions, console: {}}
    """)


def test_a_model_error_does_not_hide_the_checks_that_need_no_whole_pipeline(tmp_path: Path, capsys):
    """A bad type and a bad duration (the models refuse the file) and an allowed module that does not
    exist (imported only once the file is loaded): one report with all three, each with its line."""
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_IN_EVERY_PHASE)
    assert main(["validate", "--allow-module", "wo_test_missing_module_58", str(path)]) == 1
    report = capsys.readouterr().err.splitlines()
    assert report[0] == f"{path}: 3 error(s)", report
    assert [line.split(":")[:2] for line in report[1:]] == [
        ["  line 4", " sources.events.files.schema"], ["  line 11", " operators[0].window.sessions.gap"],
        ["  line 12", " operators[0].accumulation"]], report
    assert "unknown type 'strng'" in report[1] and "'3 parsecs'" in report[2]
    assert "cannot import module 'wo_test_missing_module_58'" in report[3]
    # code the command did not allow and a path leaving the directory are reported beside the models' errors
    path.write_text(BAD_IN_EVERY_PHASE.replace("name: sessions\n", "name: sessions\ncheckpoint: ../elsewhere\n", 1))
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    assert [(i.path, i.line) for i in info.value.issues] == [
        ("checkpoint", 0), ("sources.events.files.schema", 5), ("operators[0].window.sessions.gap", 12),
        ("operators[0].accumulation", 13)], info.value.issues
    assert "--allow-module wo_test_missing_module_58" in info.value.issues[-1].message
