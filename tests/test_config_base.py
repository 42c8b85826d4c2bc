"""One configuration base for every public option class (windows, watermarks, triggers, trigger
options, accumulations, operators): one positional-argument rule, signatures with named parameters,
``help()`` that shows the class's own options, and a public surface that imports without pyspark."""
from __future__ import annotations

import inspect
import pydoc
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import accumulations
import triggers
import windowed_operator
from accumulations import Accumulation, FieldAccumulation, MergeAccumulation, Sum
from accumulations.config import REQUIRED, Config
from triggers import AfterCount, AfterWatermark, Trigger
from windowed_operator import OperatorBase, TimeWindows, WindowOption

ROOT = Path(__file__).resolve().parent.parent


def _add(a: Any, b: Any) -> Any:
    return a + b


def _zero() -> int:
    return 0


def _same(a: Any) -> Any:
    return a


#: A valid call of every public option class: (positional arguments, keyword arguments).
EXAMPLES: dict[str, tuple[tuple, dict]] = {
    # windows
    "TimeWindows": ((10, 2), {}), "SessionWindows": ((5,), {}), "SlidingWindows": ((100,), {}),
    "CumulativeWindows": ((100, 10), {}), "GlobalWindow": ((), {}),
    # watermarks
    "UpstreamWatermark": ((), {"idle_timeout": 5}), "FixedLagWatermark": ((100,), {}),
    "BoundedDisorderWatermark": ((5000,), {}),
    # triggers and trigger options
    "AfterCount": ((3,), {}), "AfterProcessingTime": ((100,), {}), "AfterWatermark": ((), {"early": AfterCount(2)}),
    "DefaultTrigger": ((), {}), "Repeatedly": ((AfterCount(2),), {}),
    "AfterAny": ((AfterCount(2), AfterCount(3)), {}), "AfterAll": ((AfterCount(2), AfterCount(3)), {}),
    "AfterEach": ((AfterCount(2), AfterCount(3)), {}), "OrFinally": ((AfterCount(2), AfterWatermark()), {}),
    "TriggerOption": ((), {"kind": "at_watermark"}), "Firing": ((), {"count": 2}),
    # accumulations
    "Sum": (("a",), {}), "Count": ((), {}), "Min": (("a",), {}), "Max": (("a",), {}), "Mean": (("a",), {}),
    "TopN": ((3,), {"field": "a"}), "AllMax": ((), {"field": "a"}), "ToList": (("a",), {}),
    "CountDistinct": (("a",), {}), "ApproxCountDistinct": (("a",), {}), "Quantiles": (("a",), {}),
    "ApproxPercentile": (("a", 0.9), {}), "Reduce": ((_add,), {}), "Combine": ((_zero, _add, _add, _same), {}),
    "InnerJoin": ((_add,), {}), "LeftOuterJoin": ((_add,), {}), "FullOuterJoin": ((_add,), {}), "Cogroup": ((), {}),
    # operators
    "KeyedWindowedOperator": ((TimeWindows(10), Sum("a")), {"key": "k"}),
    "WindowedOperator": ((TimeWindows(10), Sum("a")), {}),
    "KeyedWindowedMergeOperator": ((TimeWindows(10), accumulations.InnerJoin()), {"key": "k"}),
    "WindowedMergeOperator": ((TimeWindows(10), accumulations.InnerJoin()), {}),
    "InputOptions": ((), {"key": "k"}),
    "Chain": ((), {"operators": [windowed_operator.WindowedOperator(TimeWindows(10), Sum())]}),
}

#: Bases users subclass or name in annotations, not construct.
ABSTRACT = {Accumulation, FieldAccumulation, MergeAccumulation, Trigger, WindowOption, OperatorBase}


def _public_option_classes() -> dict[str, type]:
    found = {}
    for package in (windowed_operator, triggers, accumulations):
        for name in package.__all__:
            value = getattr(package, name)
            if isinstance(value, type) and issubclass(value, Config) and value not in ABSTRACT:
                found[name] = value
    return found


CLASSES = _public_option_classes()


def _make(name: str) -> Any:
    args, kwargs = EXAMPLES[name]
    return CLASSES[name](*args, **kwargs)


def test_every_public_option_class_has_an_example_and_one_base():
    assert set(CLASSES) == set(EXAMPLES)
    assert not hasattr(accumulations.base, "ParameterModel")
    assert windowed_operator.config.Config is Config


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_positional_arguments_fill_the_fields_the_signature_names(name):
    cls = CLASSES[name]
    args, kwargs = EXAMPLES[name]
    signature = inspect.signature(cls)
    params = list(signature.parameters.values())
    variadic = [p for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL]
    if variadic:
        by_keyword = {variadic[0].name: list(args), **kwargs}
    else:
        positional = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        assert len(args) <= len(positional)
        by_keyword = {**dict(zip(positional, args)), **kwargs}
    assert repr(cls(*args, **kwargs)) == repr(cls(**by_keyword))


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_a_field_given_positionally_and_by_keyword_is_an_error_naming_class_and_field(name):
    cls = CLASSES[name]
    args, kwargs = EXAMPLES[name]
    params = list(inspect.signature(cls).parameters.values())
    variadic = [p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL]
    names = variadic or [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD][:len(args)]
    if not args:
        pytest.skip(f"{name} takes no positional arguments (see the too-many test)")
    for field in names:
        with pytest.raises(TypeError) as info:
            cls(*args, **{**kwargs, field: args[0]})
        assert name in str(info.value) and field in str(info.value)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_too_many_positional_arguments_is_an_error_naming_the_class(name):
    cls = CLASSES[name]
    args, kwargs = EXAMPLES[name]
    params = list(inspect.signature(cls).parameters.values())
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        if name == "OrFinally":  # exactly main and until
            with pytest.raises(ValidationError, match="triggers"):
                cls(*args, AfterCount(9), **kwargs)
            return
        pytest.skip(f"{name} takes any number of children")
    positional = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    filled = [*args, *(getattr(_make(name), p) for p in positional[len(args):])]
    with pytest.raises(TypeError) as info:
        cls(*filled, "one too many", **kwargs)
    assert name in str(info.value)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_signature_names_every_field_with_its_default(name):
    """Explicit ``__init__`` (the operators) and generated signatures alike: one parameter per
    field, with the field's default (None for a default built when not given)."""
    cls = CLASSES[name]
    params = inspect.signature(cls).parameters
    assert set(params) == set(cls.model_fields)
    for field_name, field in cls.model_fields.items():
        param = params[field_name]
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        if field.is_required():
            assert param.default in (inspect.Parameter.empty, REQUIRED), field_name
        elif field.default_factory is not None:
            assert param.default is None, field_name
        else:
            assert param.default == field.default, field_name


def test_a_required_parameter_left_out_is_named_by_pydantic():
    with pytest.raises(ValidationError) as info:
        windowed_operator.KeyedWindowedOperator(TimeWindows(10), key="k")
    assert info.value.errors()[0]["loc"] == ("accumulation",)


def test_the_drift_the_two_bases_had_is_gone():
    with pytest.raises(TypeError, match="Sum got 'field' both positionally and by keyword"):
        Sum("amount", field="price")
    with pytest.raises(TypeError, match="TimeWindows got 'size' both positionally and by keyword"):
        TimeWindows(10, size=20)
    with pytest.raises(TypeError, match="Sum takes at most 1 positional argument"):
        Sum("amount", "price")


@pytest.mark.parametrize("cls", [Sum, TimeWindows, triggers.TriggerOption, windowed_operator.KeyedWindowedOperator,
                                 accumulations.ApproxPercentile, triggers.AfterAny])
def test_help_shows_the_class_own_options_first(cls):
    text = pydoc.render_doc(cls, renderer=pydoc.plaintext)
    lines = text.splitlines()
    head = "\n".join(lines[:40])
    for name in cls.model_fields:
        assert name in head, (cls.__name__, name)
    assert "model_dump_json" not in text and "model_json_schema" not in text
    assert len(lines) < 200  # pydantic's BaseModel alone is ~500 lines


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("first", ["windowed_operator", "triggers", "accumulations", "triggers.option",
                                   "accumulations.numeric", "windowed_operator.config", "windowed_operator.windows",
                                   "windowed_operator.operator", "windowed_operator.pipeline.spec"])
def test_any_package_imports_first_without_pyspark(first):
    """Every public name resolves (type checkers see them statically: ``tests/test_typing.py``),
    whatever is imported first, without pyspark and without an import cycle."""
    result = _run(f"import {first}, sys, windowed_operator as w\n"
                  "assert 'pyspark' not in sys.modules, 'pyspark imported'\n"
                  "missing = [n for n in w.__all__ if getattr(w, n, None) is None]\n"
                  "assert not missing, missing\n")
    assert result.returncode == 0, result.stderr


def test_importing_the_package_loads_no_engine():
    """``import windowed_operator`` stays light (the driver's state-declaring process imports it)."""
    result = _run("import sys, windowed_operator\n"
                  "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pandas', 'pydantic') or "
                  "m.startswith('windowed_operator.')))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['windowed_operator._version']"


def test_accumulations_import_nothing_else_of_the_library():
    result = _run("import sys, accumulations\n"
                  "print(sorted(m for m in sys.modules if m.split('.')[0] in ('windowed_operator', 'triggers')))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_version_is_the_declared_one():
    import re

    # (tomllib is Python 3.11's; the package declares 3.10: the [project] table's version line)
    project = (ROOT / "pyproject.toml").read_text().split("[project]", 1)[1].split("\n[", 1)[0]
    declared = re.search(r'^version = "([^"]+)"$', project, re.MULTILINE)
    assert declared is not None
    assert windowed_operator.__version__ == declared.group(1)


def test_cli_prints_its_version():
    result = subprocess.run([sys.executable, "-m", "windowed_operator.cli", "--version"], capture_output=True,
                            text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"windowed-operator {windowed_operator.__version__}\n"


def test_the_version_outside_a_source_tree_is_the_installed_distribution_s(tmp_path):
    from importlib import metadata

    from windowed_operator import _version

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "another"\nversion = "9.9"\n')
    assert _version.source_tree_version(tmp_path) is None
    copy = tmp_path / "pkg"
    copy.mkdir()
    (copy / "_version.py").write_text((ROOT / "windowed_operator" / "_version.py").read_text())
    try:
        installed = metadata.version("windowed-operator")
    except metadata.PackageNotFoundError:
        installed = "0+unknown"
    probe = subprocess.run([sys.executable, "-c", "import runpy, sys; print(runpy.run_path(sys.argv[1])['__version__'])",
                            str(copy / "_version.py")], capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == installed, probe.stderr


#: What ``triggers`` may import of ``windowed_operator``: the model (the public surface first, see
#: ``triggers/__init__.py``), never the engine, state or runners.
TRIGGERS_MAY_IMPORT = {"windowed_operator", "windowed_operator.config", "windowed_operator.time",
                       "windowed_operator.time_rules", "windowed_operator.windows.base"}


@pytest.mark.parametrize("package", ["triggers", "accumulations"])
def test_triggers_and_accumulations_import_only_the_model(package):
    import ast

    imported = set()
    for path in sorted((ROOT / package).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    library = {m for m in imported if m.split(".")[0] in ("windowed_operator", "triggers", "accumulations")}
    allowed = TRIGGERS_MAY_IMPORT if package == "triggers" else set()
    assert library <= allowed, sorted(library - allowed)
