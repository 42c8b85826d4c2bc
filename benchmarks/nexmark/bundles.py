"""An event file cut into the bundles a streaming run delivers, each followed by the watermark a
bounded-disorder watermark holds after it. Beam's streaming run (``beam_queries.py --streaming``)
feeds these to a TestStream; it runs in Beam's interpreter, so this module needs only the standard
library."""
from __future__ import annotations

import json
from typing import Optional


def event_time_ms(line: str) -> int:
    """The event time of one JSON event line (Beam's format also allows ``{"millis": ...}``)."""
    at = json.loads(line)["dateTime"]
    return int(at["millis"]) if isinstance(at, dict) else int(at)


def bundles(lines: list[str], count: int, disorder_ms: int) -> list[tuple[list[tuple[str, int]], Optional[int]]]:
    """``lines`` in order as ``count`` bundles of (line, event time) pairs, each with the watermark to
    advance to after it: the largest event time seen so far minus ``disorder_ms``, or None where that
    does not advance the last one (a TestStream's watermark must strictly advance)."""
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    per = max(1, -(-len(lines) // count))
    out: list[tuple[list[tuple[str, int]], Optional[int]]] = []
    seen: Optional[int] = None
    held: Optional[int] = None
    for first in range(0, len(lines), per):
        bundle = [(line, event_time_ms(line)) for line in lines[first:first + per]]
        seen = max([at for _, at in bundle] + ([] if seen is None else [seen]))
        advance = held is None or seen - disorder_ms > held
        if advance:
            held = seen - disorder_ms
        out.append((bundle, held if advance else None))
    return out
