"""mkdocs hooks: the pages generated from the code at build time (never hand-copied).

- ``reference/api/*.md``: one mkdocstrings directive per public name of ``windowed_operator``,
  ``triggers`` and ``accumulations`` (their ``__all__``), each pointing at the defining module;
- ``reference/pipeline-schema.md``: the JSON schema of the pydantic ``Pipeline`` model
  (``windowed_operator/pipeline/spec.py``, ``model_json_schema()``);
- ``reference/cli.md``: the help of every ``windowed-operator`` command, from its argparse parser;
- ``contributing/modules.md``: every module of the three packages with the first sentence of its
  docstring, so the map follows the code as it moves;
The performance page includes the tables of ``benchmarks/results/INDEX.md`` itself (a snippet).

The API reference lists a class's own members before those it inherits (``on_config``), and shows the
option classes' runtime signatures (the griffe extension ``tools/griffe_signatures.py``).
"""
from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

PACKAGES = {
    "windowed_operator": "The operators, windows, watermarks and panes (`windowed_operator`).",
    "triggers": "Triggers and the fluent `TriggerOption` (`triggers`).",
    "accumulations": "The `Accumulation` protocol and the accumulations provided (`accumulations`).",
}
#: Public modules beyond the packages' top level, documented whole.
MODULES = {
    "windowed_operator.testing": "Test streams for the local runner.",
    "windowed_operator.spark": "The Spark runner's entry points.",
    "windowed_operator.spark.inspect": "Reading a checkpoint's state.",
    "windowed_operator.viz": "Pane timeline plots.",
}


def api_page(package: str) -> str:
    module = importlib.import_module(package)
    lines = [f"# `{package}`", "", PACKAGES[package], ""]
    for name in sorted(module.__all__):
        value = getattr(module, name)
        home = getattr(value, "__module__", None) or package
        if not home.startswith(package) or not hasattr(value, "__qualname__"):
            home = package  # a constant: documented where the package's __init__ or module states it
            if package == "windowed_operator":
                lines += [f"## `{name}`", "", f"`{name} = {value!r}` (milliseconds).", ""]
                continue
        lines += [f"::: {home}.{name}", "    options:", "      heading_level: 2",
                  f"      show_root_full_path: false", ""]
    return "\n".join(lines)


def modules_page() -> str:
    lines = ["# Other public modules", ""]
    for module, what in MODULES.items():
        lines += [f"## `{module}`", "", what, "", f"::: {module}", "    options:", "      heading_level: 3",
                  "      show_root_heading: false", ""]
    return "\n".join(lines)


def schema_page() -> str:
    from windowed_operator.pipeline.document import Pipeline

    schema = json.dumps(Pipeline.model_json_schema(), indent=2, sort_keys=True)
    return "\n".join([
        "# Pipeline-file schema", "",
        "The JSON schema of a pipeline file (YAML or JSON), generated from the pydantic models of "
        "`windowed_operator/pipeline/` (`Pipeline.model_json_schema()`) when the site is built. "
        "The [pipeline files guide](../guides/pipeline-files.md) explains the fields with an example; "
        "`windowed-operator validate FILE` checks a file against these models and more (columns, "
        "DDL types, paths).", "",
        "```json", schema, "```", ""])


def cli_help(argv: list[str]) -> str:
    from windowed_operator import cli

    out = io.StringIO()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            cli.main(argv + ["--help"])
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return out.getvalue().rstrip()


def cli_page() -> str:
    lines = ["# Command line: `windowed-operator`", "",
             "Generated from the command's argparse parser (`windowed_operator/cli.py`) when the site is built.", "",
             "```text", cli_help([]), "```", ""]
    for command in ("demo", "validate", "run", "state"):
        lines += [f"## `windowed-operator {command}`", "", "```text", cli_help([command]), "```", ""]
    return "\n".join(lines)


def pane_timeline_png() -> bytes:
    """The picture of ``docs/images/pane-timeline.png`` (``python tools/docs_hooks.py`` redraws it): the first example of the getting-started page (10 s windows, early every 2 elements, one late
    element, retracting), drawn as the README's picture."""
    from accumulations import Sum
    from triggers import TriggerOption
    from windowed_operator import KeyedWindowedOperator, TimeWindows
    from windowed_operator.testing import TimestampedValue
    from windowed_operator.viz import plot_pane_timeline, points_from_runner

    op = KeyedWindowedOperator(TimeWindows(10_000), Sum(),
                               trigger=(TriggerOption.at_watermark().with_early_firings_at_every(count=2)
                                        .with_late_firings_at_every(count=1)
                                        .accumulating_and_retracting_fired_panes()),
                               allowed_lateness=60_000)
    runner = op.local_runner()
    runner.add_elements(TimestampedValue(("user1", 3), 1_000), TimestampedValue(("user1", 5), 2_000))
    runner.add_elements(TimestampedValue(("user1", 6), 12_000))
    runner.advance_watermark_to(10_000)
    runner.add_elements(TimestampedValue(("user1", 4), 3_000))
    runner.advance_watermark_to(20_000)
    runner.finish()
    with tempfile.TemporaryDirectory() as tmp:
        path = plot_pane_timeline(points_from_runner(runner, "user1"), Path(tmp) / "timeline.png",
                                  title="user1: Sum in 10 s windows, early every 2, late every 1, retracting")
        return Path(path).read_bytes()


def first_sentence(text: str) -> str:
    """The first sentence of a docstring, on one line."""
    flat = " ".join(text.split())
    for end in (". ", ".\n"):
        if end.strip() and end in flat + " ":
            return (flat + " ").split(end, 1)[0].rstrip(".") + "."
    return flat


def modules_map_page() -> str:
    import ast

    root = Path(__file__).resolve().parent.parent
    lines = ["# Module map", "",
             "Every module of `windowed_operator`, `triggers` and `accumulations`, with the first sentence of "
             "its docstring; generated from the code when the site is built. The "
             "[architecture](architecture.md) page explains how they fit together.", ""]
    for package in PACKAGES:
        lines += [f"## `{package}`", "", "| module | what it holds |", "|---|---|"]
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            summary = first_sentence(doc).replace("|", "\\|") if doc else "(no module docstring)"
            lines.append(f"| `{relative}` | {summary} |")
        lines.append("")
    return "\n".join(lines)


def own_members_first(order_members: Any) -> Any:
    """The python handler's ``order_members`` filter, then a class's own members before the inherited
    ones (those of the nearest base first), each group in the configured order (``members_order``):
    ``Sum``'s options and methods come before the ``Accumulation`` protocol methods it only inherits.
    Sorting by source line alone mixes the lines of different files."""

    def order(members: Any, order: Any, members_list: Any = None) -> Any:
        ordered = list(order_members(members, order, members_list))
        if isinstance(members_list, list) and members_list:
            return ordered  # an explicit ``members`` list is the order

        def rank(member: Any) -> tuple[int, int]:
            if not getattr(member, "inherited", False):
                return (0, 0)
            try:
                bases = [base.path for base in member.parent.mro()]
                return (1, bases.index(member.target.parent.path))
            except Exception:  # an alias that does not resolve: after the resolved ones
                return (1, 1 << 30)

        return sorted(ordered, key=rank)  # stable: the configured order within each group

    return order


def on_config(config: Any) -> Any:
    """Install ``own_members_first`` in the python handler, each time it sets its Jinja filters up
    (``update_env``, called for each page)."""
    handler = config.plugins["mkdocstrings"].get_handler("python")
    update_env = handler.update_env

    def update_env_then_order(*args: Any, **kwargs: Any) -> None:
        update_env(*args, **kwargs)
        handler.env.filters["order_members"] = own_members_first(handler.env.filters["order_members"])

    handler.update_env = update_env_then_order
    return config


def on_files(files: Files, config: Any) -> Files:
    generated = {f"reference/api/{package}.md": api_page(package) for package in PACKAGES}
    generated["reference/api/modules.md"] = modules_page()
    generated["reference/pipeline-schema.md"] = schema_page()
    generated["reference/cli.md"] = cli_page()
    generated["contributing/modules.md"] = modules_map_page()
    for path, text in generated.items():
        files.append(File.generated(config, path, content=text))
    return files


if __name__ == "__main__":  # redraw the committed picture the README and the concepts page show
    target = Path(__file__).resolve().parent.parent / "docs" / "images" / "pane-timeline.png"
    target.write_bytes(pane_timeline_png())
    print(target)
