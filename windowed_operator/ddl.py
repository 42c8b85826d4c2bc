"""Spark DDL column lists read without Spark: ``validate`` names a bad type before a JVM starts.

``"user string, amount decimal(10, 2), tags array<string>, at struct<lat: double, lon: double>"``
gives ``[("user", "string"), ("amount", "decimal(10, 2)"), ...]``.  Types follow Spark SQL's
grammar (``CatalystSqlParser``): primitive names with their aliases, ``decimal(p, s)``,
``varchar(n)``/``char(n)``, ``array<T>``, ``map<K, V>``, ``struct<name: T, ...>`` and
``interval``s; a column may add ``NOT NULL`` and ``COMMENT '...'``.  An unknown type is an error
naming the column, the type and the closest known name.
"""
from __future__ import annotations

import difflib
import re

PRIMITIVES = frozenset({
    "string", "binary", "boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "bigint", "long",
    "float", "real", "double", "date", "timestamp", "timestamp_ltz", "timestamp_ntz", "void", "variant",
})
WITH_LENGTH = frozenset({"varchar", "char", "character"})
DECIMALS = frozenset({"decimal", "dec", "numeric"})
INTERVAL_UNITS = frozenset({"year", "month", "day", "hour", "minute", "second"})
KNOWN = sorted(PRIMITIVES | WITH_LENGTH | DECIMALS | {"array", "map", "struct", "interval"})

_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|'(?:[^'\\]|\\.)*'|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


class DDLError(ValueError):
    pass


class _Reader:
    def __init__(self, text: str) -> None:
        self.tokens: list[str] = []
        position = 0
        text = text.rstrip()
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None:
                raise DDLError(f"unexpected {text[position:].strip()[:20]!r} in the schema")
            self.tokens.append(match.group(1))
            position = match.end()
        self.at = 0

    def peek(self) -> str:
        return self.tokens[self.at] if self.at < len(self.tokens) else ""

    def take(self) -> str:
        token = self.peek()
        if not token:
            raise DDLError("the schema ends early")
        self.at += 1
        return token

    def expect(self, token: str) -> None:
        found = self.take()
        if found != token:
            raise DDLError(f"expected {token!r}, found {found!r}")

    def name(self) -> str:
        token = self.take()
        if token.startswith("`"):
            return token[1:-1].replace("``", "`")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token):
            raise DDLError(f"expected a column name, found {token!r}")
        return token


def _type(reader: _Reader, column: str) -> str:
    """One data type, returned as normalised text."""
    word = reader.take()
    name = word.lower()
    if name in PRIMITIVES:
        return name
    if name in WITH_LENGTH:
        reader.expect("(")
        length = reader.take()
        reader.expect(")")
        return f"{name}({length})"
    if name in DECIMALS:
        if reader.peek() != "(":
            return "decimal"
        reader.take()
        digits = [reader.take()]
        if reader.peek() == ",":
            reader.take()
            digits.append(reader.take())
        reader.expect(")")
        return f"decimal({', '.join(digits)})"
    if name == "array":
        reader.expect("<")
        element = _type(reader, column)
        reader.expect(">")
        return f"array<{element}>"
    if name == "map":
        reader.expect("<")
        key = _type(reader, column)
        reader.expect(",")
        value = _type(reader, column)
        reader.expect(">")
        return f"map<{key}, {value}>"
    if name == "struct":
        reader.expect("<")
        fields = []
        while reader.peek() != ">":
            field = reader.name()
            if reader.peek() == ":":
                reader.take()
            fields.append(f"{field}: {_type(reader, f'{column}.{field}')}")
            _modifiers(reader)
            if reader.peek() == ",":
                reader.take()
        reader.expect(">")
        return f"struct<{', '.join(fields)}>"
    if name == "interval":
        units = []
        while reader.peek().lower() in INTERVAL_UNITS | {"to"}:
            units.append(reader.take().lower())
        return " ".join(["interval", *units])
    close = difflib.get_close_matches(name, KNOWN, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(KNOWN)})"
    raise DDLError(f"column {column!r}: unknown type {word!r}{hint}")


def _modifiers(reader: _Reader) -> None:
    """``NOT NULL`` and ``COMMENT '...'`` after a column's or a field's type."""
    while True:
        word = reader.peek().lower()
        if word == "not":
            reader.take()
            if reader.take().lower() != "null":
                raise DDLError("expected NULL after NOT")
        elif word == "comment":
            reader.take()
            if not reader.take().startswith("'"):
                raise DDLError("expected a quoted comment after COMMENT")
        else:
            return


def parse_columns(text: str) -> list[tuple[str, str]]:
    """The (name, type) of each column of a DDL column list; ``DDLError`` names what is wrong."""
    reader = _Reader(text)
    columns: list[tuple[str, str]] = []
    if not reader.peek():
        raise DDLError("the schema has no columns")
    while True:
        name = reader.name()
        if reader.peek() == ":":
            reader.take()
        if not reader.peek() or reader.peek() == ",":
            raise DDLError(f"column {name!r} has no type")
        columns.append((name, _type(reader, name)))
        _modifiers(reader)
        if not reader.peek():
            break
        reader.expect(",")
    seen: set[str] = set()
    for name, _ in columns:
        if name.lower() in seen:
            raise DDLError(f"column {name!r} is declared twice")
        seen.add(name.lower())
    return columns
