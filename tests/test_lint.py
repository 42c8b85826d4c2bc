"""The library packages pass the linter and the type checker as pyproject.toml configures them
(``[tool.ruff]``, ``[tool.mypy]``): a new finding fails here with the tool's own report."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["windowed_operator", "triggers", "accumulations"]


def _check(module: str, args: list[str]) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")
    command = [sys.executable, "-m", module, *args]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        pytest.fail(f"{' '.join(command[1:])} (exit {result.returncode}):\n{result.stdout}{result.stderr}",
                    pytrace=False)


def test_ruff_finds_nothing() -> None:
    _check("ruff", ["check", "--no-cache", *PACKAGES])


def test_mypy_finds_nothing() -> None:
    # (the Spark runner's types come from pyspark: a core-only install, `.[test]`, cannot check them)
    pytest.importorskip("pyspark", reason="mypy checks the Spark runner against pyspark's types: install the spark extra")
    _check("mypy", ["--config-file", str(ROOT / "pyproject.toml")])  # the packages: [tool.mypy] files
