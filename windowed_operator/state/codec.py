"""Per-key state as data: a JSON text any reader can parse, never code.

A checkpoint must not run code when it is read (a pickle does: whoever can write to the checkpoint
location could run code on the executors), and users should be able to read it with Spark's state
data source.  So a key's state is encoded as JSON: window bookkeeping in named fields, and every
value the state holds (accumulators, trigger state, last outputs, element buffers) in a tagged form
that keeps Python's types exact: a primitive (None, bool, int, finite float, str) stands for itself;
anything else is a two-element list ``[tag, payload]``: ``["l", [...]]`` a list, ``["t", [...]]`` a
tuple, ``["r", {k: v, ...}]`` a dict whose keys are all strings (a record: a row of a join, say),
``["d", [[k, v], ...]]`` any other dict, ``["s", [...]]`` a set, ``["f", "nan"]`` a special float,
``["b", base64]`` bytes, ``["dt", iso]`` / ``["date", iso]`` / ``["dec", text]`` times and decimals.

A user-defined accumulator of another type cannot be stored as data: encoding it fails naming the
type, unless the operator allows pickled values (``state_encoding="pickle"``), which then appear as
``["p", base64]`` and are the one thing a reader has to trust.
"""
from __future__ import annotations

import base64
import datetime as dt
import json
import math
import pickle
from decimal import Decimal
from typing import Any, Callable

import numpy as np

from ..engine.key_state import KeyState, SlidingAggregate, WindowState
from ..windows.base import Window


class StateEncodingError(TypeError):
    """A value in the state that data-only encoding cannot hold."""


#: Types that are their own tagged form (exact types: a subclass, such as an IntEnum, is converted).
_SELF_ENCODED = frozenset({str, int, bool, type(None)})


def _encoder(allow_pickle: bool) -> Callable[[Any], Any]:
    plain = _SELF_ENCODED

    def encode(value: Any) -> Any:
        # The exact built-in types first, by identity: the rows a join or a list keeps are dicts and
        # lists of them, encoded member by member, and a chain of isinstance checks cost most of
        # that (measured on a join's accumulators); subclasses and other types take the chain.
        t = type(value)
        if t in plain:
            return value
        if t is dict:
            for k in value:
                if type(k) is not str:
                    break
            else:
                return ["r", {k: v if type(v) in plain else encode(v) for k, v in value.items()}]
        elif t is list:
            return ["l", [v if type(v) in plain else encode(v) for v in value]]
        elif t is tuple:
            return ["t", [v if type(v) in plain else encode(v) for v in value]]
        elif t is float and math.isfinite(value):
            return value
        return encode_other(value)

    def encode_other(value: Any) -> Any:
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            # (repr of the float itself: a numpy float's repr names its type, which float() cannot read)
            return value if math.isfinite(value) else ["f", repr(float(value))]
        if isinstance(value, np.generic):
            return encode(value.item())
        if type(value) is dict:  # (one with a key that is not a string)
            return ["d", [[k if type(k) in plain else encode(k), v if type(v) in plain else encode(v)]
                          for k, v in value.items()]]
        for base in (list, tuple, dict):  # a subclass: the form of its base type
            if isinstance(value, base):
                return encode(base(value))
        if isinstance(value, (set, frozenset)):
            return ["s", [encode(v) for v in value]]
        if isinstance(value, (bytes, bytearray)):
            return ["b", base64.b64encode(bytes(value)).decode()]
        if isinstance(value, dt.datetime):
            return ["dt", value.isoformat()]
        if isinstance(value, dt.date):
            return ["date", value.isoformat()]
        if isinstance(value, Decimal):
            return ["dec", str(value)]
        if isinstance(value, np.ndarray):
            return encode(value.tolist())
        if allow_pickle:
            return ["p", base64.b64encode(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).decode()]
        raise StateEncodingError(
            f"the state holds a {type(value).__module__}.{type(value).__qualname__} ({value!r:.80}), which is not "
            "data this library can store without pickle: make the accumulator of built-in types (numbers, strings, "
            "lists, tuples, dicts, sets, bytes, dates, decimals), or pass state_encoding='pickle' to apply() and "
            "trust the checkpoint location")

    return encode


def _decoder(allow_pickle: bool) -> Callable[[Any], Any]:
    def decode(value: Any) -> Any:
        if not isinstance(value, list):
            return value
        tag, payload = value
        # (only a list is a tagged form: other members are their own value, kept without a call)
        if tag == "l":
            return [decode(v) if type(v) is list else v for v in payload]
        if tag == "t":
            return tuple([decode(v) if type(v) is list else v for v in payload])
        if tag == "r":
            return {k: decode(v) if type(v) is list else v for k, v in payload.items()}
        if tag == "d":
            return {_hashable(decode(k)) if type(k) is list else k: decode(v) if type(v) is list else v
                    for k, v in payload}
        if tag == "s":
            return {decode(v) for v in payload}
        if tag == "f":
            return float(payload)
        if tag == "b":
            return base64.b64decode(payload)
        if tag == "dt":
            return dt.datetime.fromisoformat(payload)
        if tag == "date":
            return dt.date.fromisoformat(payload)
        if tag == "dec":
            return Decimal(payload)
        if tag == "p":
            if not allow_pickle:
                raise StateEncodingError("the checkpoint holds a pickled value; reading it runs code: pass "
                                         "state_encoding='pickle' to apply() only if you trust the checkpoint")
            return pickle.loads(base64.b64decode(payload))
        raise StateEncodingError(f"unknown state value tag {tag!r}")

    return decode


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


class KeyStateCodec:
    """``KeyState`` <-> JSON text.  ``allow_pickle``: values of other types are pickled (opt-in)."""

    def __init__(self, allow_pickle: bool = False) -> None:
        self.value = _encoder(allow_pickle)
        self.read_value = _decoder(allow_pickle)

    # -- one window -------------------------------------------------------------------------------
    def _window(self, window: Window, ws: WindowState) -> dict:
        value = self.value
        out: dict[str, Any] = {"start": window.start, "end": window.end, "acc": value(ws.acc)}
        if ws.trigger_state:
            out["trigger_state"] = value(ws.trigger_state)
        if ws.timers:
            out["timers"] = dict(ws.timers)
        for name in ("pane_index", "nonspeculative_index", "pending", "last_timestamp"):
            if getattr(ws, name):
                out[name] = getattr(ws, name)
        for name in ("fired", "closed", "on_time_hold"):
            if getattr(ws, name):
                out[name] = True
        if ws.fired:
            out["last_output"] = value(ws.last_output)
        if ws.pane_min_ts is not None:
            out["pane_ts"] = [ws.pane_min_ts, ws.pane_max_ts]
        return out

    def _read_window(self, data: dict) -> tuple[Window, WindowState]:
        read = self.read_value
        low, high = data.get("pane_ts", (None, None))
        pending = data.get("pending", 0)
        # ``on_time_hold`` is the END_OF_WINDOW element hold, which every pane releases; state version 8
        # and before kept it across EARLY panes.  A hold needs an element since the last pane, so the
        # flag is read with ``pending`` (state written since always has one when it has the other).
        ws = WindowState(acc=read(data["acc"]), trigger_state=read(data.get("trigger_state", ["d", []])),
                         timers=dict(data.get("timers", {})), pane_index=data.get("pane_index", 0),
                         nonspeculative_index=data.get("nonspeculative_index", 0), fired=data.get("fired", False),
                         last_output=read(data.get("last_output")), last_timestamp=data.get("last_timestamp", 0),
                         closed=data.get("closed", False), pending=pending, pane_min_ts=low,
                         pane_max_ts=high, on_time_hold=data.get("on_time_hold", False) and pending > 0)
        return Window(data["start"], data["end"]), ws

    # -- a key ------------------------------------------------------------------------------------
    def new(self) -> KeyState:
        return KeyState()

    @staticmethod
    def is_empty(state: KeyState) -> bool:
        return state.is_empty()

    def encode(self, state: KeyState) -> str:
        return json.dumps(self.to_data(state), separators=(",", ":"), allow_nan=False)

    def decode(self, text: str) -> KeyState:
        return self.from_data(json.loads(text))

    def to_data(self, state: KeyState) -> dict:
        """The key's state as JSON-able data."""
        value = self.value
        out: dict[str, Any] = {"windows": [self._window(w, ws) for w, ws in state.windows.items()]}
        if len(state.buffer):
            out["buffer"] = [[ts, value(state.buffer.partials[ts])] for ts in state.buffer.times]
        if state.window_times:
            out["window_times"] = list(state.window_times)
        sliding = state.sliding
        if sliding.front or sliding.back or not sliding.valid:
            out["sliding"] = {"front": value(sliding.front), "back": value(sliding.back),
                              "back_agg": value(sliding.back_agg), "valid": sliding.valid}
        return out

    def from_data(self, data: dict) -> KeyState:
        read = self.read_value
        state = KeyState()
        for item in data["windows"]:
            window, ws = self._read_window(item)
            state.windows[window] = ws
        for ts, partial in data.get("buffer", []):
            state.buffer.add(ts, read(partial))
        state.window_times = list(data.get("window_times", []))
        if "sliding" in data:
            sliding = data["sliding"]
            state.sliding = SlidingAggregate(read(sliding["front"]), read(sliding["back"]),
                                             read(sliding["back_agg"]), sliding["valid"])
        return state


__all__ = ["KeyStateCodec", "StateEncodingError"]
