"""User code a pipeline refers to, and who allows it.

A pipeline file names user code only by an importable dotted path (``package.module:function``);
whoever *runs* the pipeline decides which may be imported (``CodePolicy``: the CLI's
``--allow-code`` or ``--allow-module``), never the file itself.
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional


#: A piece of user code a pipeline refers to: its location, its dotted path, and what refers to it.
CodeUse = tuple[tuple, str, str]


def import_dotted(path: str) -> Any:
    """``package.module:attribute`` (or ``package.module.attribute``)."""
    module_name, _, attribute = path.partition(":") if ":" in path else path.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"{path!r} is not a dotted path such as 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module {module_name!r} of {path!r}: {exc}") from None
    if not hasattr(module, attribute):
        raise ValueError(f"module {module_name!r} has no attribute {attribute!r}")
    return getattr(module, attribute)


@dataclass(frozen=True)
class CodePolicy:
    """Which user code a pipeline may import: none (the default), any (``--allow-code``), or the
    modules named (``--allow-module pkg.mod``, which also allows its submodules)."""

    allow_all: bool = False
    modules: tuple[str, ...] = ()

    def permits(self, dotted: str) -> bool:
        if self.allow_all:
            return True
        module = dotted.partition(":")[0] if ":" in dotted else dotted.rpartition(".")[0]
        return any(module == allowed or module.startswith(allowed + ".") for allowed in self.modules)

    def refusal(self, dotted: str, what: str) -> str:
        module = dotted.partition(":")[0] if ":" in dotted else dotted.rpartition(".")[0]
        return (f"{what} {dotted!r}; user code runs only when the command allows it: pass --allow-code, or "
                f"--allow-module {module or dotted} (load_pipeline(..., code=CodePolicy(...)) from Python)")


def import_errors(used: list[CodeUse], code: CodePolicy, directory: Optional[Path]) -> list[tuple[tuple, str]]:
    """Each allowed piece of user code in ``used`` that cannot be imported, with its location;
    ``directory`` (the pipeline file's) is put first on the module path for it."""
    if directory is not None:
        add_module_directory(directory)
    found = []
    for loc, dotted, _ in used:
        if not code.permits(dotted):
            continue  # (refused, not imported)
        try:
            import_dotted(dotted)
        except ValueError as exc:
            where = f" (modules beside the pipeline file, in {str(directory)!r}, are found; on a cluster ship them " \
                    "with --py-files)" if directory is not None else ""
            found.append((loc, f"{exc}{where}"))
    return found


def add_module_directory(directory: Path) -> str:
    """Put ``directory`` first on this process's module path; returns it as an absolute path."""
    entry = str(directory.resolve())
    if entry not in sys.path:
        sys.path.insert(0, entry)
    return entry
