"""The library's version: the installed distribution's, else (a source tree on ``sys.path`` that is
not installed) the one ``pyproject.toml`` beside the package declares."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

DISTRIBUTION = "windowed-operator"


def source_tree_version(root: Path) -> Optional[str]:
    """``[project] version`` of ``root/pyproject.toml`` when it declares this distribution, else None."""
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    if project is None or not re.search(rf'^name\s*=\s*"{DISTRIBUTION}"', project.group(1), re.MULTILINE):
        return None
    version = re.search(r'^version\s*=\s*"([^"]+)"', project.group(1), re.MULTILINE)
    return version.group(1) if version else None


def _version() -> str:
    """The source tree's declaration when this package is run from one (a checkout on
    ``PYTHONPATH`` may differ from what is installed), else the installed distribution's, else
    ``0+unknown`` (a copy of the package outside both)."""
    declared = source_tree_version(Path(__file__).resolve().parent.parent)
    if declared is not None:
        return declared
    from importlib import metadata  # only here: it costs ~10 ms to import

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


__version__: str = _version()
