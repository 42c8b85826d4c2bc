"""Every public name of the three packages has a docstring, and so has every public method of their
public classes (its own, or the one of the protocol method it implements): the API reference is
generated from them."""
from __future__ import annotations

import importlib
import inspect

import pytest

PACKAGES = ("windowed_operator", "triggers", "accumulations")


def _public() -> list[tuple[str, object]]:
    found = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                found.append((f"{package}.{name}", value))
    return found


def _methods(cls: type) -> list[tuple[str, object]]:
    found = []
    for klass in cls.__mro__:
        if not klass.__module__.split(".")[0] in PACKAGES:
            continue
        for name, member in vars(klass).items():
            if name.startswith("_"):
                continue
            function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
            function = function.fget if isinstance(function, property) else function
            if inspect.isfunction(function):
                found.append((name, getattr(cls, name)))
    return found


@pytest.mark.parametrize("name,value", _public(), ids=[n for n, _ in _public()])
def test_a_public_name_says_what_it_is_for(name, value):
    assert (value.__doc__ or "").strip(), f"{name} has no docstring"
    if inspect.isclass(value):
        missing = sorted({m for m, member in _methods(value) if not (inspect.getdoc(member) or "").strip()})
        assert not missing, f"{name}: methods without a docstring: {missing}"


def test_the_accumulation_protocol_methods_say_what_the_runtime_calls_and_when():
    from accumulations import Accumulation, MergeAccumulation

    for cls, methods in ((Accumulation, ("default_accumulated_value", "accumulate", "merge", "get_output",
                                         "get_retraction", "subtract", "fold_array", "fold_segments")),
                         (MergeAccumulation, ("default_accumulated_value", "accumulate1", "accumulate2", "merge",
                                              "get_output", "get_retraction"))):
        for method in methods:
            doc = getattr(cls, method).__doc__ or ""
            assert len(doc.split()) >= 15, f"{cls.__name__}.{method}: {doc!r}"
