"""Pipeline files: validation with locations, no code without allow_code, building operators."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from accumulations import Count, InnerJoin, Sum
from windowed_operator import KeyedWindowedMergeOperator, KeyedWindowedOperator, SessionWindows, TimeWindows
from windowed_operator.pipeline import PipelineError, parse_pipeline

GOOD = textwrap.dedent("""
    name: clicks
    checkpoint: /tmp/wo-test-checkpoints
    sources:
      clicks:
        files: {path: data/clicks, format: json, schema: "user string, page string, amount bigint, ts bigint"}
      views:
        memory: {schema: "user string, ts bigint", rows: [{user: a, ts: 1}]}
    operators:
      - name: sessions
        input: clicks
        key: user
        timestamp: ts
        window: {sessions: {gap: 30s}}
        trigger: {kind: at_watermark, early: {count: 5}, late: {duration: 1m}, mode: accumulating_and_retracting}
        accumulation: {count: {}}
        allowed_lateness: 1m
        watermark: {bounded_disorder: 10s}
      - name: spend
        input: clicks
        key: user
        timestamp: ts
        window: {hopping: {size: 1m, slide: 10s}}
        accumulation: {sum: {field: amount}}
      - name: joined
        left: clicks
        right: views
        key: user
        timestamp: ts
        window: {tumbling: {size: 1m}}
        accumulation: {inner_join: {}}
    sinks:
      - {input: sessions, console: {}}
      - {input: joined, memory: {query_name: joined}}
""")


def test_a_good_pipeline_builds_the_operators_it_describes():
    pipeline = parse_pipeline(GOOD)
    ops = pipeline.build_operators()
    sessions, spend, joined = ops["sessions"], ops["spend"], ops["joined"]
    assert isinstance(sessions, KeyedWindowedOperator) and sessions.window == SessionWindows(30_000)
    assert isinstance(sessions.accumulation, Count) and sessions.allowed_lateness == 60_000
    assert sessions.trigger.retracting and sessions.trigger.early.count == 5 and sessions.trigger.late.duration == 60_000
    assert sessions.watermark.max_disorder == 10_000
    assert spend.window == TimeWindows(60_000).slide_by(10_000) and spend.accumulation == Sum("amount")
    assert isinstance(joined, KeyedWindowedMergeOperator) and isinstance(joined.accumulation, InnerJoin)


def issues_of(text: str) -> list[str]:
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text)
    return [str(i) for i in info.value.issues]


def test_every_structural_error_is_reported_with_its_line_and_path():
    bad = GOOD.replace("gap: 30s", "gap: 30 parsecs").replace("{sum: {field: amount}}",
                                                              "{sum: {field: amount}, count: {}}")
    bad = bad.replace("    accumulation: {inner_join: {}}", "    accumulation: {inner_join: {}}\n    colour: blue")
    assert issues_of(bad) == [
        "line 14: operators[0].window.sessions.gap: duration '30 parsecs' is not a number with a unit "
        "(ms, s, m, h, d), e.g. '10s'",
        "line 24: operators[1].accumulation: give exactly one accumulation (sum, count, min, max, mean, to_list, "
        "top_n, inner_join, left_outer_join, full_outer_join, cogroup, code); got sum, count",
        "line 32: operators[2].colour: unknown field 'colour'",
    ]


def test_unknown_names_and_user_code_are_refused_with_locations():
    bad = GOOD.replace("right: views", "right: veiws").replace("{input: sessions, console: {}}",
                                                                "{input: sessions, foreach_batch: {function: 'os:system'}}")
    assert issues_of(bad) == [
        "line 27: operators[2].right: 'veiws' is not a source or an earlier operator "
        "(known: ['clicks', 'sessions', 'spend', 'views'])",
        "line 33: sinks[0].foreach_batch: calls user code; set allow_code: true",
    ]
    joined = GOOD.replace("{inner_join: {}}", "{inner_join: {join: 'operator:add'}}")
    assert issues_of(joined) == ["line 31: operators[2].accumulation: refers to user code; set allow_code: true "
                                 "to allow importing it"]
    allowed = parse_pipeline("allow_code: true\n" + joined)
    assert allowed.build_operators()["joined"].accumulation.join(1, 2) == 3


def test_a_merge_accumulation_needs_two_inputs():
    bad = GOOD.replace("accumulation: {count: {}}", "accumulation: {cogroup: {}}")
    assert issues_of(bad) == ["line 10: operators[0]: accumulation: a one-input operator needs a one-input accumulation"]


def test_yaml_tags_are_not_evaluated_and_syntax_errors_have_lines():
    assert "not valid YAML/JSON" in issues_of("sources: !!python/object/apply:os.system ['echo hi']\n")[0]
    assert issues_of("sources: [\n")[0].startswith("line 2:")


def test_json_files_work_and_the_cli_exits_non_zero(tmp_path):
    import json

    import yaml

    good = tmp_path / "good.json"
    good.write_text(json.dumps(yaml.safe_load(GOOD), indent=2))
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("gap: 30s", "gap: -1"))
    ok = subprocess.run([sys.executable, "-m", "windowed_operator.cli", "validate", str(good)], capture_output=True,
                        text=True)
    assert ok.returncode == 0 and "ok (2 source(s), 3 operator(s), 2 sink(s))" in ok.stdout
    failed = subprocess.run([sys.executable, "-m", "windowed_operator.cli", "validate", str(bad)],
                            capture_output=True, text=True)
    assert failed.returncode == 1
    assert "line 14: operators[0].window.sessions.gap: Input should be greater than 0" in failed.stderr
