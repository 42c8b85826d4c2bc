"""Small helpers that make expected outputs readable in tests."""
from __future__ import annotations

from windowed_operator.panes import PaneRecord


def fmt(record: PaneRecord) -> str:
    """``key [start,end) value TIMING #index`` plus flags: F first, L last, R retraction."""
    flags = ("F" if record.is_first else "") + ("L" if record.is_last else "") + ("R" if record.is_retraction else "")
    key = "" if record.key is None else f"{record.key} "
    text = f"{key}[{record.window_start},{record.window_end}) {record.value!r} {record.timing.value} #{record.index}"
    return f"{text} {flags}" if flags else text


def fmts(records: list[PaneRecord]) -> list[str]:
    return [fmt(r) for r in records]
