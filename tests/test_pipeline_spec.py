"""Pipeline files: validation with locations, no code unless the command allows it, building operators."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from accumulations import Count, InnerJoin, Sum
from windowed_operator import KeyedWindowedMergeOperator, KeyedWindowedOperator, SessionWindows, TimeWindows
from windowed_operator.pipeline import CodePolicy, PipelineError, load_pipeline, parse_pipeline

GOOD = textwrap.dedent("""
    name: clicks
    checkpoint: checkpoints
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
    trigger_interval: 5s
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


def issues_of(text: str, **kw) -> list[str]:
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text, **kw)
    return [str(i) for i in info.value.issues]


def test_every_structural_error_is_reported_with_its_line_and_path():
    bad = GOOD.replace("gap: 30s", "gap: 30 parsecs").replace("{sum: {field: amount}}",
                                                              "{sum: {field: amount}, count: {}}")
    bad = bad.replace("    accumulation: {inner_join: {}}", "    accumulation: {inner_join: {}}\n    colour: blue")
    assert issues_of(bad) == [
        "line 14: operators[0].window.sessions.gap: duration '30 parsecs' is not a number with a unit "
        "(ms, s, m, h, d, or seconds, minutes...), e.g. '10s'",
        "line 24: operators[1].accumulation: give exactly one accumulation (sum, count, min, max, mean, to_list, "
        "top_n, all_max, count_distinct, approx_count_distinct, quantiles, approx_percentile, inner_join, left_outer_join, "
        "full_outer_join, cogroup, code); got sum, count",
        "line 32: operators[2].colour: unknown field 'colour'",
    ]


def test_unknown_names_and_user_code_are_refused_with_locations():
    bad = GOOD.replace("right: views", "right: veiws").replace("{input: sessions, console: {}}",
                                                                "{input: sessions, foreach_batch: {function: 'os:system'}}")
    assert issues_of(bad) == [
        "line 27: operators[2].right: 'veiws' is not a source or an earlier operator "
        "(known: ['clicks', 'sessions', 'spend', 'views'])",
        "line 33: sinks[0].foreach_batch: calls user code 'os:system'; user code runs only when the command allows "
        "it: pass --allow-code, or --allow-module os (load_pipeline(..., code=CodePolicy(...)) from Python)",
    ]
    joined = GOOD.replace("{inner_join: {}}", "{inner_join: {join: 'operator:add'}}")
    assert issues_of(joined)[0].startswith("line 31: operators[2].accumulation: refers to user code 'operator:add'; "
                                           "user code runs only when the command allows it")
    allowed = parse_pipeline(joined, code=CodePolicy(allow_all=True))
    assert allowed.build_operators()["joined"].accumulation.join(1, 2) == 3
    assert parse_pipeline(joined, code=CodePolicy(modules=("operator",))).build_operators()
    assert issues_of(joined, code=CodePolicy(modules=("oper", "operator.sub")))  # a prefix is not its module


def test_a_file_cannot_allow_code_for_itself():
    joined = GOOD.replace("{inner_join: {}}", "{inner_join: {join: 'subprocess:call'}}")
    assert issues_of("allow_code: true\n" + joined) == [
        "line 1: allow_code: a pipeline file cannot allow code for itself: whoever runs it does "
        "(windowed-operator run --allow-code, or --allow-module package.module)"]
    assert "refers to user code 'subprocess:call'" in issues_of(joined)[0]


def test_the_cli_decides_about_code(tmp_path):
    (tmp_path / "data" / "clicks").mkdir(parents=True)  # the CLI wants a files source's data to exist
    path = tmp_path / "p.yaml"
    path.write_text(GOOD.replace("{inner_join: {}}", "{inner_join: {join: 'operator:add'}}")
                    )
    cli = [sys.executable, "-m", "windowed_operator.cli", "validate", str(path)]
    refused = subprocess.run(cli, capture_output=True, text=True)
    assert refused.returncode == 1 and "--allow-module operator" in refused.stderr
    for flags in (["--allow-code"], ["--allow-module", "operator"]):
        allowed = subprocess.run([*cli, *flags], capture_output=True, text=True)
        assert allowed.returncode == 0, allowed.stderr


@pytest.mark.parametrize("field, value", [
    ("checkpoint", "../elsewhere"), ("checkpoint", "/tmp/wo-absolute"), ("files.path", "../../etc"),
    ("files.path", "data/../../outside"),
])
def test_paths_stay_inside_the_pipelines_directory_unless_allowed(tmp_path, field, value):
    if field == "checkpoint":
        text = GOOD.replace("checkpoint: checkpoints", f"checkpoint: {value}")
    else:
        text = GOOD.replace("path: data/clicks", f"path: {value}")
    (tmp_path / "pipes").mkdir()
    path = tmp_path / "pipes" / "p.yaml"
    path.write_text(text)
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    where = "checkpoint" if field == "checkpoint" else "sources.clicks.files.path"
    assert f"{where}: path {value!r} leaves the pipeline's directory" in str(info.value)
    assert "--allow-outside-paths" in str(info.value)
    assert load_pipeline(path, outside_paths=True)
    inside = load_pipeline(path.parent / ".." / "pipes" / "p.yaml", outside_paths=True)
    assert inside.sources["clicks"].files.path.startswith("/")


def test_a_yaml_alias_bomb_is_refused_before_it_expands():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
    assert len(bomb) < 500
    assert issues_of(bomb) == ["file: <root>: the document expands to more than 100,000 values through YAML aliases "
                      "(&anchor / *alias)"]
    modest = GOOD.replace("\nsinks:", "\ndefaults: &d {at: 1}\nmore: *d\nsinks:")  # parsed like any file
    assert issues_of(modest) == ["line 32: defaults: unknown field 'defaults'", "line 33: more: unknown field 'more'"]


@pytest.mark.parametrize("text", ["[" * 1_000 + "]" * 1_000, "{a: " * 200 + "1" + "}" * 200,
                                  "".join(f"{'  ' * i}k{i}:\n" for i in range(300)) + "  " * 300 + "v"],
                         ids=["brackets", "braces", "indented"])
def test_values_nested_too_deep_are_one_error_not_a_recursion_error(text):
    """A 2 KB file of 1,000 nested brackets made the YAML parser overflow the stack (issue 56)."""
    assert issues_of(text) == ["file: <root>: values nest more than 64 levels deep (a pipeline's values nest a "
                               "few levels)"]


def test_an_oversized_file_is_refused():
    text = GOOD + "#" * 1_000_001
    assert issues_of(text) == [f"file: <root>: the file has {len(text):,} bytes; pipeline files are limited to "
                               "1,000,000 (put data in sources)"]


def test_a_merge_accumulation_needs_two_inputs():
    bad = GOOD.replace("accumulation: {count: {}}", "accumulation: {cogroup: {}}")
    assert issues_of(bad) == ["line 10: operators[0]: accumulation: a one-input operator needs a one-input accumulation"]


def test_yaml_tags_are_not_evaluated_and_syntax_errors_have_lines():
    assert "not valid YAML/JSON" in issues_of("sources: !!python/object/apply:os.system ['echo hi']\n")[0]
    assert issues_of("sources: [\n")[0].startswith("line 2:")


def test_json_files_work_and_the_cli_exits_non_zero(tmp_path):
    import json

    import yaml

    (tmp_path / "data" / "clicks").mkdir(parents=True)  # the CLI wants a files source's data to exist
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


def test_a_processing_time_trigger_without_trigger_interval_is_refused_with_the_reason():
    (issue,) = issues_of(GOOD.replace("trigger_interval: 5s\n", ""))
    assert issue.startswith("line 15: operators[0].trigger: processing time decides this operator's panes, which "
                            "needs trigger_interval")
    fixed_lag = GOOD.replace("trigger_interval: 5s\n", "").replace(
        "late: {duration: 1m}", "late: {count: 1}").replace("bounded_disorder: 10s", "fixed_lag: 10s")
    assert [i.split(":")[0] + ":" + i.split(":")[1] for i in issues_of(fixed_lag)] == \
        ["line 18: operators[0].watermark.fixed_lag"]
    parse_pipeline(GOOD.replace("late: {duration: 1m}", "late: {count: 1}").replace("trigger_interval: 5s\n", ""))


def test_every_accumulation_a_file_can_name_is_one_row_and_its_class_validates_the_arguments():
    """The file's accumulations are the table ``ACCUMULATIONS`` (a new one is a row); each takes its
    class's own parameters, checked by the class's constraints; only classes whose every form needs a
    callable (``Combine``, ``Reduce``) are left to ``code``."""
    import accumulations
    from accumulations.base import Accumulation
    from accumulations.merge import MergeAccumulation
    from windowed_operator.pipeline.spec import ACCUMULATIONS, AccumulationSpec

    public = {name for name in accumulations.__all__ if isinstance(getattr(accumulations, name), type)
              and issubclass(getattr(accumulations, name), (Accumulation, MergeAccumulation))}
    assert public - {cls.__name__ for cls in ACCUMULATIONS.values()} == {
        "Accumulation", "MergeAccumulation", "FieldAccumulation", "Combine", "Reduce"}
    built = AccumulationSpec.model_validate({"all_max": {"field": "amount"}}).build()
    assert built == accumulations.AllMax(field="amount")
    assert AccumulationSpec.model_validate({"approx_count_distinct": {"field": "u", "lg_k": 10}}).build() == \
        accumulations.ApproxCountDistinct("u", lg_k=10)
    for bad, where in [({"top_n": {"n": 0}}, "top_n.n"), ({"approx_count_distinct": {"lg_k": 30}}, "lg_k"),
                       ({"all_max": {"key": "x"}}, "all_max.key")]:  # (a callable key cannot be in a file)
        with pytest.raises(ValueError, match=where):
            AccumulationSpec.model_validate(bad)
