"""The one base of every user-facing configuration class: windows, watermarks, triggers, trigger
options, accumulations and operators are frozen pydantic models that also take positional arguments.

``TimeWindows(10_000)`` and ``Sum("amount")`` read better than keywords, and pydantic models only take
keywords, so each class lists in ``_positional`` the fields its positional arguments fill, in order
(composite triggers instead name in ``_varargs`` the one list field every positional argument goes
to).  One rule holds for every class: more positional arguments than that is an error, and so is a
field given both positionally and by keyword; both errors name the class (and the field).  A class
may define its own ``__init__`` with named parameters (the operators do, for type checkers); it then
passes keywords only, and Python applies the same rule to it.

This module lives in ``accumulations``, the lowest package, and imports nothing else of the library,
so that ``accumulations``, ``triggers`` and ``windowed_operator`` all build on it.
"""
from __future__ import annotations

import inspect
import typing
from typing import TYPE_CHECKING, Any, ClassVar, Optional

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticUndefined

if TYPE_CHECKING:  # the metaclass type checkers know (pydantic's public name for it is ``type(BaseModel)``)
    from pydantic._internal._model_construction import ModelMetaclass as _ModelMetaclass
else:
    _ModelMetaclass = type(BaseModel)


class _Required:
    """The default shown for a parameter that must be given but follows one with a default
    (``KeyedWindowedOperator(window=None, accumulation=<required>, ...)``)."""

    def __repr__(self) -> str:
        return "<required>"


#: The marker of a required parameter placed after optional ones in a signature.
REQUIRED: Any = _Required()


class _OptionClass(_ModelMetaclass):
    def __dir__(cls) -> list[str]:
        """``help()`` of an option class shows its own API (its signature, docstring and the
        methods the library defines), not the ~400 lines of pydantic internals and BaseModel
        methods every model inherits; they still work (``model_dump``, ``model_copy``...) and an
        instance's ``dir()`` still lists them."""
        names = {"__init__"}
        for klass in cls.__mro__:
            if klass not in (BaseModel, object):
                names.update(name for name in vars(klass) if not name.startswith("_") and name != "model_config")
        return sorted(names)


def _shown(annotation: Any) -> Any:
    """An annotation as a signature shows it: without ``Annotated`` validators (``Duration`` is an int)."""
    strip = getattr(typing, "_strip_annotations", None)
    return strip(annotation) if strip is not None else annotation


def _annotation_text(annotation: Any) -> str:
    return inspect.formatannotation(_shown(annotation)).replace("NoneType", "None")


class Config(BaseModel, metaclass=_OptionClass):
    """Frozen, strict about extra fields, with positional arguments (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)
    #: The fields positional arguments fill, in order.
    _positional: ClassVar[tuple[str, ...]] = ()
    #: A list field that takes every positional argument instead (``AfterAny(t1, t2)``).
    _varargs: ClassVar[Optional[str]] = None
    #: Said when a call gives more positional arguments than the class takes (what was probably meant).
    _misuse_hint: ClassVar[str] = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args:
            kwargs = type(self)._bind_positional(args, kwargs)
        super().__init__(**kwargs)

    @classmethod
    def _bind_positional(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` with the positional ``args`` added under the names they fill."""
        if cls._varargs is not None:
            if cls._varargs in kwargs:
                raise TypeError(f"{cls.__name__} got {cls._varargs!r} both positionally and by keyword")
            return {**kwargs, cls._varargs: list(args)}
        if len(args) > len(cls._positional):
            raise TypeError(
                f"{cls.__name__} takes at most {len(cls._positional)} positional argument(s) "
                f"({', '.join(cls._positional) or 'none'}), got {len(args)}"
                + (f": {cls._misuse_hint}" if cls._misuse_hint else ""))
        bound = dict(kwargs)
        for name, value in zip(cls._positional, args):
            if name in kwargs:
                raise TypeError(f"{cls.__name__} got {name!r} both positionally and by keyword")
            bound[name] = value
        return bound

    def _init_given(self, arguments: dict[str, Any]) -> None:
        """Initialise from the parameters of a class's own ``__init__`` (its ``locals()``): a
        parameter left at ``REQUIRED`` is not passed (pydantic then names the missing field), nor is
        None for a field whose default is built (``trigger``, ``watermark``: None means that default)."""
        fields = type(self).model_fields
        given = {}
        for name, value in arguments.items():
            if name not in fields or value is REQUIRED:
                continue
            if value is None and fields[name].default_factory is not None:
                continue
            given[name] = value
        Config.__init__(self, **given)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "__init__" not in vars(cls):
            cls.__signature__ = cls._signature()  # pydantic's is keywords only
        cls._document_options()

    @classmethod
    def _signature(cls) -> inspect.Signature:
        """The call signature the positional rule gives: the positional fields first (a required one
        after an optional one shows ``<required>``), the other fields by keyword only."""
        params = []
        fields = cls.model_fields
        if cls._varargs is not None:
            params.append(inspect.Parameter(cls._varargs, inspect.Parameter.VAR_POSITIONAL,
                                            annotation=cls._item_annotation(cls._varargs)))
        positional = [name for name in cls._positional if name in fields] if cls._varargs is None else []
        seen_default = False
        for name in positional:
            default = cls._field_default(name)
            if default is inspect.Parameter.empty and seen_default:
                default = REQUIRED
            seen_default = seen_default or default is not inspect.Parameter.empty
            params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                            annotation=_shown(fields[name].annotation)))
        for name, field in fields.items():
            if name in positional or name == cls._varargs:
                continue
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=cls._field_default(name),
                                            annotation=_shown(field.annotation)))
        return inspect.Signature(params, return_annotation=None)

    @classmethod
    def _item_annotation(cls, name: str) -> Any:
        args = getattr(cls.model_fields[name].annotation, "__args__", None)
        return _shown(args[0]) if args else inspect.Parameter.empty

    @classmethod
    def _field_default(cls, name: str) -> Any:
        field = cls.model_fields[name]
        if field.default is not PydanticUndefined:
            return field.default
        if field.default_factory is not None:
            return None  # built when not given (see ``_init_given``)
        return inspect.Parameter.empty

    @classmethod
    def _document_options(cls) -> None:
        """Append the class's options (name, type, default, description) to its docstring, so
        ``help()`` shows them right after the class's own text (unless that text lists them)."""
        own = vars(cls).get("__doc__") or ""
        if not cls.model_fields or "Options" in own:
            return
        lines = []
        for name, field in cls.model_fields.items():
            default = cls._field_default(name)
            shown = "required" if default is inspect.Parameter.empty else f"default {default!r}"
            lines.append(f"    {name}: {_annotation_text(field.annotation)} ({shown})"
                         + (f": {field.description}" if field.description else ""))
        cls.__doc__ = inspect.cleandoc(own) + "\n\nOptions:\n" + "\n".join(lines)
