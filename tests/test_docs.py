"""The documentation: the site builds with warnings as errors (broken links, missing references), its
API reference shows each option class's real signature and its own methods before the inherited ones,
every python block of its pages is marked and those meant to run print what they say, the README's
performance figures are the current results' and no page cites a dated results file."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from docs_blocks import DOCS, KINDS, ROOT, pages, printed_comments, python_blocks

DOC_TOOLS = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "griffe_inherited_docstrings", "griffe_pydantic")


def _missing_tools() -> list[str]:
    missing = []
    for name in DOC_TOOLS:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(name)
    return missing


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built once for the tests that read it (``mkdocs build --strict``): (directory, return
    code, output)."""
    missing = _missing_tools()
    if missing:
        pytest.skip(f"the docs extra is not installed (pip install -e '.[docs]'): {missing}")
    built = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(built)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return built, result.returncode, result.stdout + result.stderr


def built_site(site):
    """The site's directory, once it built."""
    built, returncode, output = site
    assert returncode == 0, output[-5000:]
    return built


def test_the_site_builds_strictly_without_a_warning(site):
    built, output = built_site(site), site[2]
    assert "WARNING" not in output, output[-5000:]
    for page in ("index.html", "reference/api/accumulations/index.html", "reference/cli/index.html",
                 "reference/pipeline-schema/index.html", "performance/index.html"):
        assert (built / page).is_file(), page
    api = (built / "reference/api/accumulations/index.html").read_text()
    for method in ("default_accumulated_value", "accumulate", "merge", "get_output", "get_retraction", "subtract"):
        assert f'id="accumulations.base.Accumulation.{method}"' in api, method
    assert "nexmark.txt" in (built / "performance/index.html").read_text()  # the index's table, included
    assert "windowed-operator state" in (built / "reference/cli/index.html").read_text()


def option_classes() -> list[tuple[str, str, type]]:
    """(package, name, class) of each public name of the three packages that is an option class
    (derives from ``accumulations.config.Config``)."""
    import importlib

    from accumulations.config import Config

    found = []
    for package in ("windowed_operator", "triggers", "accumulations"):
        module = importlib.import_module(package)
        for name in sorted(module.__all__):
            value = getattr(module, name)
            if isinstance(value, type) and issubclass(value, Config):
                found.append((package, name, value))
    return found


def api_entry(built, package: str, cls: type, name: str) -> tuple[str, str]:
    """The text of a class's heading (its rendered signature) and the HTML of its whole entry, on its
    package's reference page (``tools/docs_hooks.py``: one ``::: module.Name`` per public name)."""
    import html

    page = (built / f"reference/api/{package}/index.html").read_text()
    ident = f"{cls.__module__}.{name}"
    heading = re.search(rf'<h(\d)[^>]*\bid="{re.escape(ident)}"[^>]*>(.*?)</h\1>', page, re.S)
    assert heading, f"no entry {ident} on the {package} page"
    following = re.compile(rf"<h[1-{heading.group(1)}][\s>]").search(page, heading.end())
    entry = page[heading.start():following.start() if following else len(page)]
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", heading.group(2))).split())
    return text, entry


def test_every_option_class_shows_its_runtime_signature(site):
    """``Sum(field: Optional[str] = None)``, not ``Sum(*args: Any, **kwargs: Any)`` (what griffe reads in
    ``Config.__init__``) nor a bare ``TimeWindows``: ``tools/griffe_signatures.py`` gives griffe the
    signature Python computes (``inspect.signature``), parameter by parameter, in order."""
    import inspect

    built = built_site(site)
    classes = option_classes()
    assert len(classes) > 40 and any(cls.__name__ == "Sum" for _, _, cls in classes)
    wrong = []
    for package, name, cls in classes:
        shown, _ = api_entry(built, package, cls, name)
        parameters = inspect.signature(cls).parameters
        if f"{name}(" not in shown:
            wrong.append(f"{name}: no signature: {shown!r}")
            continue
        signature = shown.split(f"{name}(", 1)[1]
        positions = []
        for parameter in parameters.values():
            star = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}.get(parameter.kind, "")
            found = re.search(rf"(?:^|[(,\s]){re.escape(star + parameter.name)}\s*[:=,)]", signature)
            positions.append(found.start() if found else -1)
        if -1 in positions or positions != sorted(positions):
            wrong.append(f"{name}: {shown!r} for {inspect.signature(cls)}")
        for variadic in ("*args", "**kwargs"):
            if variadic in signature and variadic.lstrip("*") not in parameters:
                wrong.append(f"{name}: {variadic} in {shown!r}")
    assert not wrong, "\n".join(wrong)


def test_an_option_class_lists_its_own_methods_before_the_inherited_ones(site):
    """In a class's entry, the methods it defines come first, then those of its nearest base and so on
    (``tools/docs_hooks.py``): ``Sum.accumulate`` before ``Sum.get_retraction`` (the ``Accumulation``
    protocol's), rather than all of them by source line number, which mixes files."""
    built = built_site(site)
    wrong = []
    for package, name, cls in option_classes():
        _, entry = api_entry(built, package, cls, name)
        ident = f"{cls.__module__}.{name}"
        members = re.findall(rf'id="{re.escape(ident)}\.(\w+)"', entry)
        methods = [member for member in members
                   if inspect_kind(cls, member) in ("function", "staticmethod", "classmethod")]
        depth = [next(i for i, klass in enumerate(cls.__mro__) if method in vars(klass)) for method in methods]
        if depth != sorted(depth):
            wrong.append(f"{name}: {list(zip(methods, depth))}")
    assert not wrong, "\n".join(wrong)


def inspect_kind(cls: type, name: str) -> str:
    import inspect

    value = inspect.getattr_static(cls, name, None)
    if isinstance(value, (staticmethod, classmethod)):
        return type(value).__name__
    return "function" if inspect.isfunction(value) else "other"


def test_every_python_block_of_the_docs_is_marked():
    unmarked = [f"{page.relative_to(ROOT)} block {i}" for page in pages()
                for i, (kind, _) in enumerate(python_blocks(page)) if kind not in KINDS]
    assert not unmarked, f"mark each with <!-- test: {'|'.join(KINDS)} -->: {unmarked}"


RUNNABLE = [page for page in pages() if any(kind == "run" for kind, _ in python_blocks(page))]


def run_blocks(page, kind: str, capsys, after: tuple[str, ...] = ()) -> int:
    """Run the ``kind`` blocks of ``page`` in order in one namespace, each printing what it says, with
    the ``after`` kinds' blocks before them where the page has them; how many ``kind`` blocks ran."""
    namespace: dict = {}
    ran = 0
    for i, (marker, code) in enumerate(python_blocks(page)):
        if marker != kind and marker not in after:
            continue
        capsys.readouterr()
        exec(compile(code, f"{page.name} block {i}", "exec"), namespace)
        ran += marker == kind
        expected = printed_comments(code)
        if expected:
            printed = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
            assert printed == [" ".join(line.split()) for line in expected], f"{page.name} block {i}"
    return ran


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(DOCS)))
def test_the_runnable_blocks_of_a_page_print_what_they_say(page, capsys):
    assert run_blocks(page, "run", capsys)


ON_DUCKDB = [page for page in pages() if any(kind == "duckdb" for kind, _ in python_blocks(page))]


@pytest.mark.parametrize("page", ON_DUCKDB, ids=lambda p: str(p.relative_to(DOCS)))
def test_the_duckdb_blocks_of_a_page_print_what_they_say(page, capsys):
    """After the page's ``run`` blocks (their namespace), where the duckdb extra is installed (the core
    install, ``pip install -e ".[test]"``, has none)."""
    pytest.importorskip("duckdb", reason="the duckdb extra is not installed (pip install -e '.[duckdb]')")
    pytest.importorskip("duckdb_engine", reason="the duckdb extra is not installed (pip install -e '.[duckdb]')")
    assert run_blocks(page, "duckdb", capsys, after=("run",))


ON_POSTGRES = [page for page in pages() if any(kind == "postgres" for kind, _ in python_blocks(page))]


@pytest.mark.parametrize("page", ON_POSTGRES, ids=lambda p: str(p.relative_to(DOCS)))
def test_the_postgres_blocks_of_a_page_print_what_they_say(page, capsys, monkeypatch, postgres_url):
    """Against a server of the test run's own (skipped, saying why, where none can be started); the
    blocks read its URL from RESULTS_URL, in the plain form a user writes (no SQLAlchemy driver)."""
    monkeypatch.setenv("RESULTS_URL", postgres_url.replace("postgresql+psycopg://", "postgresql://"))
    assert run_blocks(page, "postgres", capsys)


def test_the_readme_performance_figures_are_the_current_results():
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Performance at a glance", 1)[1].split("\n## ", 1)[0]
    results = "\n".join(p.read_text() for p in (ROOT / "benchmarks" / "results").iterdir())
    figures = re.findall(r"\b(\d+\.\d+)x\b", table) + re.findall(r"(\d+\.\d+ s)", table)
    assert len(figures) >= 10
    missing = [f for f in figures if f not in results and f.replace(" s", "") not in results]
    assert not missing, f"README figures not in benchmarks/results/: {missing}"


DATED = re.compile(r"(?:results|state-scale|row-shards|state-call-costs)-20\d\d-\d\d-\d\d")


def test_no_page_or_docstring_cites_a_dated_results_file():
    sources = [ROOT / "README.md", *pages()]
    for package in ("windowed_operator", "triggers", "accumulations", "benchmarks", "examples", "tools"):
        sources += sorted((ROOT / package).rglob("*.py"))
    citing = [str(p.relative_to(ROOT)) for p in sources if p.exists() and DATED.search(p.read_text())]
    assert not citing, f"cite benchmarks/results/INDEX.md or a file under benchmarks/results/: {citing}"
