"""The README's first example prints what the README says it prints, and the examples moved from
the README to the documentation pages still do (tests/test_docs.py runs every runnable docs block)."""
import re
from pathlib import Path

from docs_blocks import DOCS, block_after, printed_comments

README = Path(__file__).resolve().parent.parent / "README.md"


def test_first_example_output_matches_readme(capsys):
    text = README.read_text()
    code = re.search(r"## A first example\n\n```python\n(.*?)```", text, re.S).group(1)
    expected = [line[2:] for line in code.splitlines() if line.startswith("# user1")]
    exec(compile(code, "README", "exec"), {})
    printed = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert printed == [" ".join(line.split()) for line in expected]


def test_the_first_example_is_the_getting_started_pages(capsys):
    readme = re.search(r"## A first example\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    assert block_after(DOCS / "getting-started.md", "## A first example") == readme


def test_merge_example_prints_what_the_docs_say(capsys):
    code = block_after(DOCS / "guides" / "joins.md", "# Merging two streams")
    exec(compile(code, "joins.md", "exec"), {})
    expected = re.search(r"# (\[\(.*\)\])\n", code).group(1)
    assert capsys.readouterr().out.strip() == expected


def check_printed_as_commented(capsys, page: Path, heading: str) -> None:
    """The first python block after ``heading`` prints, line for line, its comment lines after its first print."""
    code = block_after(page, heading)
    exec(compile(code, page.name, "exec"), {})
    expected = printed_comments(code)
    assert expected and capsys.readouterr().out.splitlines() == expected


def test_gap_and_sketch_example_prints_what_the_docs_say(capsys):
    check_printed_as_commented(capsys, DOCS / "guides" / "sketches.md", "# Distinct counts and quantiles")


def test_quiet_stream_example_prints_what_the_docs_say(capsys):
    check_printed_as_commented(capsys, DOCS / "guides" / "idle-streams.md", "# Windows that close when a stream goes quiet")

