"""The documentation: the site builds with warnings as errors (broken links, missing references),
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


@pytest.mark.skipif(bool(_missing_tools()), reason="the docs extra is not installed (pip install -e '.[docs]')")
def test_the_site_builds_strictly_without_a_warning(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "WARNING" not in output, output[-5000:]
    built = tmp_path / "site"
    for page in ("index.html", "reference/api/accumulations/index.html", "reference/cli/index.html",
                 "reference/pipeline-schema/index.html", "performance/index.html"):
        assert (built / page).is_file(), page
    api = (built / "reference/api/accumulations/index.html").read_text()
    for method in ("default_accumulated_value", "accumulate", "merge", "get_output", "get_retraction", "subtract"):
        assert f'id="accumulations.base.Accumulation.{method}"' in api, method
    assert "nexmark.txt" in (built / "performance/index.html").read_text()  # the index's table, included
    assert "windowed-operator state" in (built / "reference/cli/index.html").read_text()


def test_every_python_block_of_the_docs_is_marked():
    unmarked = [f"{page.relative_to(ROOT)} block {i}" for page in pages()
                for i, (kind, _) in enumerate(python_blocks(page)) if kind not in KINDS]
    assert not unmarked, f"mark each with <!-- test: run|spark|fragment -->: {unmarked}"


RUNNABLE = [page for page in pages() if any(kind == "run" for kind, _ in python_blocks(page))]


def run_blocks(page, kind: str, capsys) -> int:
    """Run the ``kind`` blocks of ``page`` in order in one namespace, each printing what it says; how many ran."""
    namespace: dict = {}
    ran = 0
    for i, (marker, code) in enumerate(python_blocks(page)):
        if marker != kind:
            continue
        capsys.readouterr()
        exec(compile(code, f"{page.name} block {i}", "exec"), namespace)
        ran += 1
        expected = printed_comments(code)
        if expected:
            printed = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
            assert printed == [" ".join(line.split()) for line in expected], f"{page.name} block {i}"
    return ran


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(DOCS)))
def test_the_runnable_blocks_of_a_page_print_what_they_say(page, capsys):
    assert run_blocks(page, "run", capsys)


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
