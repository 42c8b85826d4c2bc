"""What a type checker sees of the public API: the operators are classes with named, typed
parameters (not ``Any``), so a misspelled option or a wrong type is an error before anything runs,
and the README's positional forms (``Sum("amount")``, ``TimeWindows(10)``) are accepted."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parent.parent

SNIPPET = '''\
from windowed_operator import KeyedWindowedOperator, TimeWindows, WindowedMergeOperator, bounded_disorder
from accumulations import InnerJoin, Sum
from triggers import AfterCount, Repeatedly, TriggerOption

reveal_type(KeyedWindowedOperator)
op = KeyedWindowedOperator(TimeWindows(10), Sum("amount"), key="user", trigger=Repeatedly(AfterCount(2)),
                           allowed_lateness="30s", watermark=bounded_disorder(1000))
reveal_type(op)
join = WindowedMergeOperator(TimeWindows(10), InnerJoin(), idle_timeout=5, trigger=TriggerOption.at_watermark())
KeyedWindowedOperator(TimeWindows(10), Sum("amount"), kee="user")  # E: misspelled
KeyedWindowedOperator(TimeWindows(10), Sum("amount"), allowed_lateness=[1])  # E: wrong type
WindowedMergeOperator(TimeWindows(10), InnerJoin(), idle_timout=5)  # E: misspelled
from windowed_operator.spark import stop_at_end_of_input
reveal_type(stop_at_end_of_input)
stop_at_end_of_input(None, timeoutt=5)  # E: misspelled (the Spark runner's names are its functions, typed)
'''

#: Only the library is analysed: its heavy dependencies are skipped (a few seconds in all).
CONFIG = '''\
[mypy]
follow_imports = silent
ignore_missing_imports = True
incremental = False
[mypy-numpy.*,pandas.*,pyarrow.*,datasketches.*,pyspark.*,yaml.*,matplotlib.*]
follow_imports = skip
'''


def test_a_type_checker_sees_the_operators_parameters(tmp_path):
    (tmp_path / "snippet.py").write_text(SNIPPET)
    (tmp_path / "mypy.ini").write_text(CONFIG)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini"), str(tmp_path / "snippet.py")],
        capture_output=True, text=True, cwd=ROOT, timeout=300, env={**os.environ, "MYPYPATH": str(ROOT)})
    out = result.stdout
    revealed = re.findall(r'snippet\.py:(\d+): note: Revealed type is "(.*)"', out)
    assert len(revealed) == 3, out
    operator_class, instance, stop = revealed[0][1], revealed[1][1], revealed[2][1]
    assert stop.startswith("def (query: ") and "timeout: " in stop, stop
    assert operator_class.startswith("def (window: ") and "key: " in operator_class, operator_class
    assert operator_class.endswith("-> windowed_operator.operator.KeyedWindowedOperator"), operator_class
    assert instance == "windowed_operator.operator.KeyedWindowedOperator"

    error_lines = {int(n) for n in re.findall(r"snippet\.py:(\d+): error:", out)}
    expected = {n for n, line in enumerate(SNIPPET.splitlines(), start=1) if "# E:" in line}
    assert error_lines == expected, out
    assert 'Unexpected keyword argument "kee"' in out
    assert 'did you mean "idle_timeout"' in out
    assert 'did you mean "timeout"' in out
