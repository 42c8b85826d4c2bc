"""The code blocks of the README and the documentation pages, for the tests that run them.

Every ```python block of a page under ``docs/`` is marked by the comment line before it:
``<!-- test: run -->`` (executed by tests/test_docs.py, the page's blocks in order in one namespace),
``<!-- test: spark -->`` (executed by tests/spark/test_readme_commands.py with a SparkSession),
``<!-- test: postgres -->`` (executed by tests/test_docs.py with ``RESULTS_URL`` set to a PostgreSQL
server the test starts), ``<!-- test: duckdb -->`` (executed by tests/test_docs.py after the page's
``run`` blocks, in their namespace, where the duckdb extra is installed) or ``<!-- test: fragment -->``
(a piece of a program, not meant to run alone)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
KINDS = ("run", "spark", "postgres", "duckdb", "fragment")
_BLOCK = re.compile(r"(?:<!-- test: (\w+) -->\n)?```python\n(.*?)```", re.S)


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def python_blocks(page: Path) -> list[tuple[str | None, str]]:
    """(marker or None, code) of each python block of ``page``, in order."""
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer(page.read_text())]


def block_after(path: Path, heading: str) -> str:
    """The first python block after ``heading`` in ``path``."""
    return re.search(re.escape(heading) + r".*?```python\n(.*?)```", path.read_text(), re.S).group(1)


def printed_comments(code: str) -> list[str]:
    """The comment lines of a block that stand alone and follow a ``print``: what it says it prints."""
    lines = code.splitlines()
    first_print = next((i for i, line in enumerate(lines) if "print(" in line), None)
    if first_print is None:
        return []
    return [line[2:] for line in lines[first_print:] if line.startswith("# ")]


def bash_commands(paths: list[Path]) -> list[str]:
    """Each command of the bash blocks of ``paths`` (a line, with the lines it continues with a
    trailing backslash), in order, each once."""
    commands: list[str] = []
    for path in paths:
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(), flags=re.S):
            for line in re.sub(r"\\\n\s*", "", block).splitlines():
                command = re.sub(r"\s+#.*$", "", line).strip()
                if command and command not in commands:
                    commands.append(command)
    return commands
