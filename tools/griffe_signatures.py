"""Griffe extension: a class's call signature as Python computes it, where griffe's static reading is wrong.

The option classes (windows, watermarks, triggers, accumulations: subclasses of
``accumulations.config.Config``) inherit ``Config.__init__(self, *args, **kwargs)``, which binds
positional arguments to fields; at run time each subclass without its own ``__init__`` gets a real
``__signature__`` (``Config._signature()``), so ``inspect.signature(Sum)`` is ``(field=None)``.  Griffe
reads the code statically: it shows ``Sum(*args: Any, **kwargs: Any)``, or no signature at all when
the ``Config`` base lives in a package it has not loaded (``TimeWindows``, ``AfterCount``).

Once a package is loaded, this extension imports each public class of it whose griffe signature says
nothing (no ``__init__``, or one taking only ``*args`` / ``**kwargs``); when the class has a runtime
``__signature__`` whose parameters (names and kinds) differ from griffe's, it gives the griffe class an
``__init__`` with the runtime parameters: names, kinds, defaults and annotations, as text.  Classes
that define their own ``__init__`` (the operators) are read right by griffe and left alone.  Registered
in ``mkdocs.yml`` (the python handler's ``extensions``), after the other extensions.
"""
from __future__ import annotations

import ast
import enum
import html
import inspect
import re
import sys
from typing import Any, Optional

from griffe import Class, Extension, Function, Module, Parameter, ParameterKind, Parameters, dynamic_import, get_logger

_logger = get_logger("griffe_signatures")

_NAMESPACE = "griffe_signatures"
_VARIADIC = {ParameterKind.var_positional, ParameterKind.var_keyword}
#: A module path before a name (``triggers.base.Trigger``), outside quoted strings.
_MODULE_PATH = re.compile(r"\b(?:[a-z_][a-z0-9_]*\.)+(?=[A-Za-z_])")
_QUOTED = re.compile(r"('[^']*'|\"[^\"]*\")")


def annotation_text(annotation: Any) -> Optional[str]:
    """An annotation as a signature shows it: ``Optional[Trigger]`` (no module paths, ``None`` for ``NoneType``)."""
    if annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, str):  # postponed (``from __future__ import annotations``): as written
        return html.escape(annotation, quote=False)
    text = inspect.formatannotation(annotation)
    parts = _QUOTED.split(text)  # leave Literal['a.b'] alone
    text = "".join(part if i % 2 else _MODULE_PATH.sub("", part) for i, part in enumerate(parts))
    return html.escape(re.sub(r"\bNoneType\b", "None", text), quote=False)


def default_text(value: Any, module: Any) -> Optional[str]:
    """A default as a signature shows it: its repr when that is Python (``0``, ``'raise'``, ``(0.5, 0.9)``),
    else ``Enum.MEMBER`` or the module-level name bound to it (``REQUIRED``)."""
    if value is inspect.Parameter.empty:
        return None
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    text = repr(value)
    try:
        ast.parse(text, mode="eval")
    except SyntaxError:
        names = [name for name, bound in vars(module).items() if bound is value and not name.startswith("_")]
        if names:
            return names[0]
    return html.escape(text, quote=False)  # the signature template marks it safe: escape what HTML reads


def _griffe_parameters(cls: Class) -> Optional[list[tuple[str, ParameterKind]]]:
    """The (name, kind) of each parameter griffe shows for the class (without ``self``); None without ``__init__``."""
    try:
        init = cls.all_members.get("__init__")
        if init is None or init.extra.get(_NAMESPACE, {}).get("runtime"):
            return None  # none, or a base's given by this extension: the class's runtime signature may differ
        parameters = list(init.parameters)
    except Exception:  # an alias that does not resolve: griffe shows nothing
        return None
    if parameters and parameters[0].name in ("self", "cls"):
        parameters = parameters[1:]
    return [(p.name, p.kind) for p in parameters]


def _runtime_parameters(signature: inspect.Signature) -> list[tuple[str, ParameterKind]]:
    return [(p.name, ParameterKind[p.kind.name.lower()]) for p in signature.parameters.values()]


class RuntimeSignatures(Extension):
    """Replace the parameters griffe shows for a class by its runtime ``__signature__``'s when they differ."""

    def on_package(self, *, pkg: Module, **kwargs: Any) -> None:
        for cls in _classes(pkg):
            shown = _griffe_parameters(cls)
            if shown is not None and not all(kind in _VARIADIC for _, kind in shown):
                continue  # griffe read a real __init__ (the class's own or a base's)
            signature = _runtime_signature(cls)
            if signature is None or _runtime_parameters(signature) == shown:
                continue
            module = sys.modules.get(cls.module.path)
            init = Function("__init__", lineno=cls.lineno, endlineno=cls.lineno, returns="None", parent=cls)
            init.parameters = Parameters(
                Parameter("self", kind=ParameterKind.positional_or_keyword),
                *(Parameter(p.name, kind=ParameterKind[p.kind.name.lower()], annotation=annotation_text(p.annotation),
                            default=default_text(p.default, module))
                  for p in signature.parameters.values()))
            init.extra[_NAMESPACE]["runtime"] = True
            cls.set_member("__init__", init)
            _logger.debug("%s: runtime signature %s", cls.path, signature)


def _classes(scope: Module | Class):
    """The public classes defined in a module and its submodules, and the classes nested in them."""
    for member in scope.members.values():
        if member.is_alias or member.name.startswith("_"):
            continue
        if member.is_module:
            yield from _classes(member)
        elif member.is_class:
            if member.bases:  # a class without a base and without __init__ takes no argument
                yield member
            yield from _classes(member)


def _runtime_signature(cls: Class) -> Optional[inspect.Signature]:
    try:
        runtime = dynamic_import(cls.path)
        signature = getattr(runtime, "__signature__", None) if isinstance(runtime, type) else None
    except Exception as error:  # a module that cannot be imported here: keep griffe's reading
        _logger.debug("%s: not imported (%s)", cls.path, error)
        return None
    return signature if isinstance(signature, inspect.Signature) else None
