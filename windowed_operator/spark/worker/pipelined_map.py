"""Many MapState reads or writes per socket round trip.

Every MapState call of pyspark's Python API sends one request to the JVM's state server and waits
for its answer (about 0.1 ms a call: docs/contributing/measured-design.md, "What Spark's stateful API gives
and costs"), so a batch touching 20,000 keys spent most of
its time waiting.  The state server reads requests one after another from the socket and answers
each in order, so requests can be *pipelined*: write a chunk of them, flush once, then read the
chunk's answers.  The messages are the ones pyspark 4.3's ``MapStateClient`` builds; chunks are
small enough that neither side's socket buffer fills while the other waits (answers of a chunk of
reads stay well under the buffer), so it cannot deadlock.  A message split across socket reads is
read whole by the state server since SPARK-53870 (``readFully``; Spark 4.0.2 and 4.1+), which the
pinned pyspark has.  Where the client's internals are not the
expected ones (another pyspark), every operation falls back to one call each.

Per message, pyspark builds a protobuf object and converts each row through its schema; for the
rows this library keeps (a key of a primitive type, a JSON string) the bytes are a fixed frame
around the pickled values, written here directly.  The frames are checked against pyspark's own
encoding once per map: if they differ (another pyspark), pyspark's encoder is used.

Writes need no answer before the group goes on, so they can wait (``PendingWrites``): a key
group's map writes and removals, its record's update and its timer changes are sent together with
the next read, or all at once when the group's call ends, instead of a round trip per kind of
write.  The state server takes requests in the order it reads them, so a read sent after pending
writes sees them.  Every round trip trades on a busy machine: on Nexmark q11 (2 cores, both
workers busy) one took 1.5-2.3 ms of the worker's time, not the 0.1-0.2 ms of an idle one.
"""
from __future__ import annotations

import io
import pickle
import struct
from functools import lru_cache
from typing import Any, Callable, Iterable, Optional, Sequence

#: Requests per flush: reads answer with a record each (a few hundred bytes), writes with a status.
READ_CHUNK = 64
WRITE_CHUNK = 512


class _RowUnpickler(pickle.Unpickler):
    """The JVM pickles each state row as ``_create_row_inbound_converter(_parse_datatype_json_string(
    <schema JSON>))(*values)``: pyspark parses the schema JSON again for every value read (a third of
    a batch's read time, measured).  The same schema is parsed once here."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "pyspark.sql.types" and name == "_parse_datatype_json_string":
            return _parsed_type
        if module == "pyspark.sql.types" and name == "_create_row_inbound_converter":
            return _row_converter
        return super().find_class(module, name)


@lru_cache(maxsize=256)
def _parsed_type(json_string: str) -> Any:
    from pyspark.sql.types import _parse_datatype_json_string

    return _parse_datatype_json_string(json_string)


_converters: dict[int, tuple[Any, Callable]] = {}


def _row_converter(data_type: Any) -> Callable:
    """One converter per parsed type (the parsed types are cached, so ``id`` identifies them).
    Rows of fields that need no conversion (strings, numbers) are read as plain tuples: only
    their values are used, and building a ``Row`` per value cost a fifth of a read."""
    known = _converters.get(id(data_type))
    if known is None or known[0] is not data_type:
        from pyspark.sql.types import _create_row_inbound_converter

        fields = getattr(data_type, "fields", None) or []
        plain = bool(fields) and not any(f.dataType.needConversion() for f in fields)
        converter = _tuple_of if plain else _create_row_inbound_converter(data_type)
        known = _converters[id(data_type)] = (data_type, converter)
    return known[1]


def _tuple_of(*values: Any) -> tuple:
    return values


def _load_row(value: bytes) -> Any:
    return _RowUnpickler(io.BytesIO(value), encoding="bytes").load()


# -- protobuf frames, written directly --------------------------------------------------------------
_ONE_BYTE = [bytes((n,)) for n in range(0x80)]


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _ONE_BYTE[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2; field numbers here are below 16, so the tag
    is one byte)."""
    return _ONE_BYTE[number << 3 | 2] + _varint(len(payload)) + payload


class _Frames:
    """The state server's map requests as bytes: StateRequest.stateVariableRequest(3).mapStateCall(3)
    with stateName(1) and getValue(3) / updateValue(5) / removeKey(9) holding userKey(1), value(2)."""

    def __init__(self, name: str) -> None:
        self.name = _field(1, name.encode())

    def _call(self, number: int, payload: bytes) -> bytes:
        return _field(3, _field(3, self.name + _field(number, payload)))

    def get(self, key: bytes) -> bytes:
        return self._call(3, _field(1, key))

    def update(self, key: bytes, value: bytes) -> bytes:
        return self._call(5, _field(1, key) + _field(2, value))

    def remove(self, key: bytes) -> bytes:
        return self._call(9, _field(1, key))


class _ProtobufFrames:
    """The same requests built by pyspark's protobuf classes: the reference the direct frames are
    checked against, and the fallback where they differ."""

    def __init__(self, messages: Any, name: str) -> None:
        self.messages, self.name = messages, name

    def _call(self, **call: Any) -> bytes:
        m = self.messages
        map_call = m.MapStateCall(stateName=self.name, **call)
        return m.StateRequest(stateVariableRequest=m.StateVariableRequest(mapStateCall=map_call)).SerializeToString()

    def get(self, key: bytes) -> bytes:
        return self._call(getValue=self.messages.GetValue(userKey=key))

    def update(self, key: bytes, value: bytes) -> bytes:
        return self._call(updateValue=self.messages.UpdateValue(userKey=key, value=value))

    def remove(self, key: bytes) -> bytes:
        return self._call(removeKey=self.messages.RemoveKey(userKey=key))


_INT = struct.Struct("!i")
#: A value of each primitive type, to check the direct encoding against pyspark's.
_PROBES = {"StringType": "probe-é", "LongType": 1 << 40, "IntegerType": -7, "DoubleType": 1.5,
           "BooleanType": True, "ShortType": 3, "ByteType": 1, "FloatType": 0.5}


def _exchange(api: Any, messages: Any, requests: Sequence[bytes], whats: Sequence[str]) -> list[tuple[int, bytes]]:
    """Send the requests (each after the message version 0 and its length, as pyspark writes them),
    flush once, read their answers in order: (status, value); ``whats`` names each request in an error."""
    from pyspark.errors import PySparkRuntimeError

    sockfile = api.sockfile
    pack = _INT.pack
    sockfile.write(b"".join(pack(0) + pack(len(request)) + request for request in requests))
    sockfile.flush()
    read = sockfile.read
    response = messages.StateResponse()
    answers = []
    for what in whats:
        head = read(4)
        if len(head) < 4:
            raise EOFError("the state server closed the connection")
        response.ParseFromString(read(_INT.unpack(head)[0]))
        status = response.statusCode
        if status not in (0, 2):
            raise PySparkRuntimeError(f"Error in pipelined {what}: {response.errorMessage}")
        answers.append((status, response.value))
    return answers


class PendingWrites:
    """Requests that need no answer before the group goes on, held until the next round trip on
    the task's state socket (a read takes them along) or ``flush``.  At most ``WRITE_CHUNK`` wait:
    more are sent at once, so that the answers the server writes while the worker is still
    writing stay far below the socket's buffer."""

    def __init__(self, api: Any, messages: Any) -> None:
        self.api, self.messages = api, messages
        self.requests: list[bytes] = []
        self.whats: list[str] = []

    def add(self, requests: Sequence[bytes], what: str) -> None:
        self.requests.extend(requests)
        self.whats.extend([what] * len(requests))
        while len(self.requests) >= WRITE_CHUNK:
            held, whats = self.requests[:WRITE_CHUNK], self.whats[:WRITE_CHUNK]
            del self.requests[:WRITE_CHUNK], self.whats[:WRITE_CHUNK]
            _exchange(self.api, self.messages, held, whats)

    def take(self) -> tuple[list[bytes], list[str]]:
        held, whats = self.requests, self.whats
        self.requests, self.whats = [], []
        return held, whats

    def flush(self) -> None:
        if self.requests:
            _exchange(self.api, self.messages, *self.take())

    # -- requests of other state variables (pyspark's protobuf classes build them) ------------------
    def update_value(self, value_state: Any, row: tuple) -> None:
        """``value_state.update(row)``, held."""
        m = self.messages
        client = value_state._valueStateClient
        data = client._stateful_processor_api_client._serialize_to_bytes(client.schema, row)
        call = m.ValueStateCall(stateName=value_state._stateName, valueStateUpdate=m.ValueStateUpdate(value=data))
        self.add([m.StateRequest(stateVariableRequest=m.StateVariableRequest(valueStateCall=call))
                  .SerializeToString()], "value state update")

    def change_timer(self, register: bool, expiry_ms: int) -> None:
        """``handle.registerTimer(expiry_ms)`` (or ``deleteTimer``), held."""
        m = self.messages
        command = m.TimerStateCallCommand(register=m.RegisterTimer(expiryTimestampMs=expiry_ms)) if register \
            else m.TimerStateCallCommand(delete=m.DeleteTimer(expiryTimestampMs=expiry_ms))
        self.add([m.StateRequest(statefulProcessorCall=m.StatefulProcessorCall(timerStateCall=command))
                  .SerializeToString()], "timer " + ("registration" if register else "deletion"))


class PipelinedMap:
    """A MapState whose reads and writes of many keys go in one round trip to the JVM's state
    server (pyspark's API sends one request per key): the requests are written back to back and
    their answers read after (``get_many``, ``put_many``, ``remove_many``); writes may wait for the
    next round trip (``hold_writes``).  With a pyspark whose internals differ, one call per key."""

    def __init__(self, map_state: Any) -> None:
        self.state = map_state
        #: Where writes wait for the next round trip (``hold_writes``), or None: each write is sent.
        self.pending: Optional[PendingWrites] = None
        try:
            self._client = map_state._mapStateClient
            self._name = map_state._stateName
            self._api = self._client._stateful_processor_api_client
            self._api._serialize_to_bytes  # noqa: B018 - probe the internals used below
            self._api.sockfile  # noqa: B018
            import pyspark.sql.streaming.proto.StateMessage_pb2 as messages

            self._messages: Any = messages
        except (AttributeError, ImportError):  # another pyspark: one call per operation
            self._messages = None
            return
        self._key_row, direct_keys = self._row_encoder(self._client.user_key_schema)
        self._value_row, direct_values = self._row_encoder(self._client.value_schema)
        reference, direct = _ProtobufFrames(self._messages, self._name), _Frames(self._name)
        self._frames: Any = direct if self._same_frames(direct, reference) else reference
        #: Whether every request is written directly (pyspark's encoding is only the fallback).
        self.direct = self._frames is direct and direct_keys and direct_values

    # -- messages ---------------------------------------------------------------------------------
    def _row_encoder(self, schema: Any) -> tuple[Callable[[tuple], bytes], bool]:
        """Rows of primitive fields pickled directly (what pyspark's schema conversion ends in for
        them; True), other rows through pyspark (False)."""
        from pyspark import serializers

        def through_pyspark(values: tuple) -> bytes:
            return self._api._serialize_to_bytes(schema, values)

        names = [type(f.dataType).__name__ for f in getattr(schema, "fields", [])]
        if not names or any(name not in _PROBES for name in names):
            return through_pyspark, False
        protocol = getattr(serializers, "pickle_protocol", pickle.HIGHEST_PROTOCOL)

        def dumps(values: tuple) -> bytes:
            return pickle.dumps(values, protocol)

        probe = tuple(_PROBES[name] for name in names)
        return (dumps, True) if dumps(probe) == through_pyspark(probe) else (through_pyspark, False)

    def _same_frames(self, direct: _Frames, reference: _ProtobufFrames) -> bool:
        key = self._key_row(tuple(_PROBES.get(type(f.dataType).__name__, 0)
                                  for f in self._client.user_key_schema.fields))
        value = b"\x80value"
        return all(getattr(direct, op)(*args) == getattr(reference, op)(*args)
                   for op, args in (("get", (key,)), ("update", (key, value)), ("remove", (key,))))

    @property
    def direct_capable(self) -> bool:
        """Whether requests are written here (this pyspark's client is the expected one)."""
        return self._messages is not None

    def hold_writes(self, pending: PendingWrites) -> bool:
        """Hold this map's writes in ``pending`` (shared by the task's state variables); False where
        this pyspark's client is not the expected one (its writes then go one call each)."""
        if self._messages is None:
            return False
        self.pending = pending
        return True

    def _round_trip(self, requests: Sequence[bytes], what: str) -> list[tuple[int, bytes]]:
        """The requests' answers, after any pending writes' (sent first, in the same flush)."""
        held, whats = self.pending.take() if self.pending is not None else ([], [])
        answers = _exchange(self._api, self._messages, [*held, *requests],
                            [*whats, *[f"map state {what}"] * len(requests)])
        return answers[len(held):]

    # -- operations -------------------------------------------------------------------------------
    def get_many(self, keys: Sequence[tuple]) -> list[Optional[tuple]]:
        if self._messages is None:
            return [self.state.getValue(k) for k in keys]
        out: list[Optional[tuple]] = []
        for lo in range(0, len(keys), READ_CHUNK):
            requests = [self._frames.get(self._key_row(k)) for k in keys[lo:lo + READ_CHUNK]]
            for status, value in self._round_trip(requests, "read"):
                out.append(_load_row(value) if status == 0 and len(value) else None)
        return out

    def put_many(self, items: Iterable[tuple[tuple, tuple]]) -> None:
        if self._messages is None:
            for key, value in items:
                self.state.updateValue(key, value)
            return
        requests = [self._frames.update(self._key_row(key), self._value_row(value)) for key, value in items]
        if self.pending is not None:
            self.pending.add(requests, "map state write")
            return
        for lo in range(0, len(requests), WRITE_CHUNK):
            self._round_trip(requests[lo:lo + WRITE_CHUNK], "write")

    def remove_many(self, keys: Iterable[tuple]) -> None:
        if self._messages is None:
            for key in keys:
                self.state.removeKey(key)
            return
        requests = [self._frames.remove(self._key_row(k)) for k in keys]
        if self.pending is not None:
            self.pending.add(requests, "map state removal")
            return
        for lo in range(0, len(requests), WRITE_CHUNK):
            self._round_trip(requests[lo:lo + WRITE_CHUNK], "removal")
