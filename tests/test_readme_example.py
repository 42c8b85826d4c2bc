"""The README's first example prints what the README says it prints."""
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_first_example_output_matches_readme(capsys):
    text = README.read_text()
    code = re.search(r"## A first example\n\n```python\n(.*?)```", text, re.S).group(1)
    expected = [line[2:] for line in code.splitlines() if line.startswith("# user1")]
    exec(compile(code, "README", "exec"), {})
    printed = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert printed == [" ".join(line.split()) for line in expected]


def test_merge_example_prints_what_the_readme_says(capsys):
    text = README.read_text()
    code = re.search(r"## Merging two streams.*?```python\n(.*?)```", text, re.S).group(1)
    exec(compile(code, "README", "exec"), {})
    expected = re.search(r"# (\[\(.*\)\])\n", code).group(1)
    assert capsys.readouterr().out.strip() == expected


def check_printed_as_commented(capsys, heading: str, marker: str) -> None:
    """The first python block after ``heading`` prints, line for line, its comment lines starting with ``marker``."""
    code = re.search(heading + r".*?```python\n(.*?)```", README.read_text(), re.S).group(1)
    exec(compile(code, "README", "exec"), {})
    expected = [line[2:] for line in code.splitlines() if line.startswith(marker)]
    assert capsys.readouterr().out.splitlines() == expected


def test_gap_and_sketch_example_prints_what_the_readme_says(capsys):
    check_printed_as_commented(capsys, "## Distinct counts and quantiles", "# [")


def test_quiet_stream_example_prints_what_the_readme_says(capsys):
    check_printed_as_commented(capsys, "## Windows that close when a stream goes quiet", "# ")


def test_table_sink_example_prints_what_the_readme_says(capsys):
    check_printed_as_commented(capsys, "## Results as a table", "# ")
