"""Many MapState reads or writes per socket round trip.

Every MapState call of pyspark's Python API sends one request to the JVM's state server and waits
for its answer (SPARK_NOTES.md: about 0.1 ms a call), so a batch touching 20,000 keys spent most of
its time waiting.  The state server reads requests one after another from the socket and answers
each in order, so requests can be *pipelined*: write a chunk of them, flush once, then read the
chunk's answers.  The messages are the ones pyspark 4.3's ``MapStateClient`` builds; chunks are
small enough that neither side's socket buffer fills while the other waits (answers of a chunk of
reads stay well under the buffer), so it cannot deadlock.  Where the client's internals are not the
expected ones (another pyspark), every operation falls back to one call each.
"""
from __future__ import annotations

import io
import pickle
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
    """One converter per parsed type (the parsed types are cached, so ``id`` identifies them)."""
    known = _converters.get(id(data_type))
    if known is None or known[0] is not data_type:
        from pyspark.sql.types import _create_row_inbound_converter

        known = _converters[id(data_type)] = (data_type, _create_row_inbound_converter(data_type))
    return known[1]


def _load_row(value: bytes) -> Any:
    return _RowUnpickler(io.BytesIO(value), encoding="bytes").load()


class PipelinedMap:
    def __init__(self, map_state: Any) -> None:
        self.state = map_state
        try:
            self._client = map_state._mapStateClient
            self._name = map_state._stateName
            self._api = self._client._stateful_processor_api_client
            self._api._send_proto_message  # noqa: B018 - probe the internals used below
            self._api._receive_proto_message  # noqa: B018
            import pyspark.sql.streaming.proto.StateMessage_pb2 as messages

            self._messages: Any = messages
        except (AttributeError, ImportError):  # another pyspark: one call per operation
            self._messages = None

    # -- messages ---------------------------------------------------------------------------------
    def _request(self, **call: Any) -> bytes:
        m = self._messages
        map_call = m.MapStateCall(stateName=self._name, **call)
        return m.StateRequest(stateVariableRequest=m.StateVariableRequest(mapStateCall=map_call)).SerializeToString()

    def _key_bytes(self, key: tuple) -> bytes:
        return self._api._serialize_to_bytes(self._client.user_key_schema, key)

    def _round_trip(self, requests: Sequence[bytes], what: str) -> list[tuple[int, str, bytes]]:
        """Send the requests, flush once, read their answers in order."""
        from pyspark.errors import PySparkRuntimeError
        from pyspark.serializers import write_int

        sockfile = self._api.sockfile
        for request in requests:
            write_int(0, sockfile)  # the message version, as pyspark writes it
            write_int(len(request), sockfile)
            sockfile.write(request)
        sockfile.flush()
        answers = [self._api._receive_proto_message() for _ in requests]
        for status, error, _ in answers:
            if status not in (0, 2):
                raise PySparkRuntimeError(f"Error in pipelined map state {what}: {error}")
        return answers

    # -- operations -------------------------------------------------------------------------------
    def get_many(self, keys: Sequence[tuple]) -> list[Optional[tuple]]:
        if self._messages is None:
            return [self.state.getValue(k) for k in keys]
        out: list[Optional[tuple]] = []
        for lo in range(0, len(keys), READ_CHUNK):
            chunk = keys[lo:lo + READ_CHUNK]
            requests = [self._request(getValue=self._messages.GetValue(userKey=self._key_bytes(k))) for k in chunk]
            for status, _, value in self._round_trip(requests, "read"):
                out.append(_load_row(value) if status == 0 and len(value) else None)
        return out

    def put_many(self, items: Iterable[tuple[tuple, tuple]]) -> None:
        if self._messages is None:
            for key, value in items:
                self.state.updateValue(key, value)
            return
        value_schema = self._client.value_schema
        requests = [self._request(updateValue=self._messages.UpdateValue(
            userKey=self._key_bytes(key), value=self._api._serialize_to_bytes(value_schema, value)))
            for key, value in items]
        for lo in range(0, len(requests), WRITE_CHUNK):
            self._round_trip(requests[lo:lo + WRITE_CHUNK], "write")

    def remove_many(self, keys: Iterable[tuple]) -> None:
        if self._messages is None:
            for key in keys:
                self.state.removeKey(key)
            return
        requests = [self._request(removeKey=self._messages.RemoveKey(userKey=self._key_bytes(k))) for k in keys]
        for lo in range(0, len(requests), WRITE_CHUNK):
            self._round_trip(requests[lo:lo + WRITE_CHUNK], "removal")
