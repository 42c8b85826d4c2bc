"""Public names imported on first use: the one mechanism behind ``windowed_operator`` and
``windowed_operator.spark`` (each keeps the table of its names, ``_EXPORTS``, and says why its
names are lazy)."""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def on_first_use(package: str, exports: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: a name of ``exports`` (name -> module under the
    package) is imported from its module when first asked for, then kept in ``namespace`` (the
    package's globals), so later lookups find it directly."""
    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    return __getattr__
