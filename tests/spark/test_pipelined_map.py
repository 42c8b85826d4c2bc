"""The pipelined MapState client against a fake state server (no JVM): the bytes it writes are the
requests pyspark's own client would send, answers come back in order, and the direct encoding is
the one in use with this pyspark (if pyspark changes its encoding, the fallback keeps working but
this test says the fast path was lost)."""
from __future__ import annotations

import pickle
import socket
import struct
import threading
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.serializers import PickleSerializer  # noqa: E402
from pyspark.sql.streaming.stateful_processor_api_client import StatefulProcessorApiClient  # noqa: E402
from pyspark.sql.types import LongType, StringType, StructField, StructType  # noqa: E402
import pyspark.sql.streaming.proto.StateMessage_pb2 as messages  # noqa: E402

from windowed_operator.spark.worker.pipelined_map import WRITE_CHUNK, PendingWrites, PipelinedMap  # noqa: E402

VALUE_SCHEMA = StructType([StructField("record", StringType())])


class _JvmStyleRow:
    """Pickles as the JVM's state server pickles a row: a converter built from the schema JSON."""

    def __init__(self, schema: StructType, values: tuple) -> None:
        self.schema, self.values = schema, values

    def __reduce__(self) -> Any:
        return _Converter(self.schema), self.values


class _Converter:
    def __init__(self, schema: StructType) -> None:
        self.schema = schema

    def __call__(self, *values: Any) -> Any:  # pickle wants a callable; never called here
        raise AssertionError("only pickled")

    def __reduce__(self) -> Any:
        from pyspark.sql.types import _create_row_inbound_converter

        return _create_row_inbound_converter, (_SchemaJson(self.schema),)


class _SchemaJson:
    def __init__(self, schema: StructType) -> None:
        self.schema = schema

    def __reduce__(self) -> Any:
        from pyspark.sql.types import _parse_datatype_json_string

        return _parse_datatype_json_string, (self.schema.json(),)


class FakeStateServer(threading.Thread):
    """Answers map requests from a dict of pickled key -> pickled value; records what it got."""

    def __init__(self, sock: socket.socket, key_schema: StructType) -> None:
        super().__init__(daemon=True)
        self.sock, self.key_schema = sock, key_schema
        self.data: dict[bytes, tuple] = {}
        self.requests: list[bytes] = []
        self.fail_with: str = ""
        #: Value state updates (name, row) and timer changes ("register"/"delete", ms), in order.
        self.values: list[tuple[str, tuple]] = []
        self.timers: list[tuple[str, int]] = []

    def run(self) -> None:
        reader = self.sock.makefile("rb")
        while True:
            head = reader.read(8)
            if len(head) < 8:
                return
            version, length = struct.unpack("!ii", head)
            assert version == 0
            raw = reader.read(length)
            self.requests.append(raw)
            request = messages.StateRequest()
            request.ParseFromString(raw)
            response = messages.StateResponse(statusCode=0)
            if request.WhichOneof("method") == "statefulProcessorCall":
                timer = request.statefulProcessorCall.timerStateCall
                kind = timer.WhichOneof("method")
                self.timers.append((kind, getattr(timer, kind).expiryTimestampMs))
                self._answer(response)
                continue
            if request.stateVariableRequest.WhichOneof("method") == "valueStateCall":
                value_call = request.stateVariableRequest.valueStateCall
                self.values.append((value_call.stateName, pickle.loads(value_call.valueStateUpdate.value)))
                self._answer(response)
                continue
            call = request.stateVariableRequest.mapStateCall
            assert call.stateName == "wo_keys"
            kind = call.WhichOneof("method")
            if self.fail_with:
                response.statusCode = 1
                response.errorMessage = self.fail_with
            elif kind == "getValue":
                found = self.data.get(call.getValue.userKey)
                if found is not None:
                    response.value = pickle.dumps(_JvmStyleRow(VALUE_SCHEMA, found))
            elif kind == "updateValue":
                self.data[call.updateValue.userKey] = pickle.loads(call.updateValue.value)
            elif kind == "removeKey":
                self.data.pop(call.removeKey.userKey, None)
            else:
                response.statusCode = 1
                response.errorMessage = f"unexpected {kind}"
            if not self._answer(response):
                return

    def _answer(self, response: Any) -> bool:
        body = response.SerializeToString()
        try:
            self.sock.sendall(struct.pack("!i", len(body)) + body)
        except (BrokenPipeError, ConnectionResetError):
            return False  # the client stopped reading (a test that expects it to fail): the server ends
        return True


class _FakeMapState:
    """What PipelinedMap reads of pyspark's MapState: its client, its name, its schemas."""

    def __init__(self, api: Any, key_schema: StructType) -> None:
        self._stateName = "wo_keys"
        self._mapStateClient = type("Client", (), {})()
        self._mapStateClient._stateful_processor_api_client = api
        self._mapStateClient.user_key_schema = key_schema
        self._mapStateClient.value_schema = VALUE_SCHEMA


def _client_and_server(key_schema: StructType) -> tuple[PipelinedMap, FakeStateServer]:
    ours, theirs = socket.socketpair()
    ours.settimeout(20)  # a server that died fails the test instead of hanging it
    api = StatefulProcessorApiClient.__new__(StatefulProcessorApiClient)
    api.pickleSer = PickleSerializer()  # what pyspark's state client uses
    api.sockfile = ours.makefile("rwb", 65536)
    server = FakeStateServer(theirs, key_schema)
    server.start()
    return PipelinedMap(_FakeMapState(api, key_schema)), server


@pytest.mark.parametrize("key_type, keys", [(StringType(), [f"user-{i}-é" for i in range(150)]),
                                            (LongType(), [i * 7_919 - 500 for i in range(150)])])
def test_many_reads_writes_and_removals_in_order(key_type: Any, keys: list) -> None:
    key_schema = StructType([StructField("key", key_type)])
    store, server = _client_and_server(key_schema)
    assert store.direct, "the direct request encoding no longer matches pyspark's: the fast path is lost"
    store.put_many([((k,), (f"record of {k}",)) for k in keys])
    assert store.get_many([(k,) for k in keys[:3]] + [("absent",) if key_type == StringType() else (-1,)]) == [
        (f"record of {k}",) for k in keys[:3]] + [None]
    store.remove_many([(k,) for k in keys[::2]])
    got = store.get_many([(k,) for k in keys])
    assert got == [None if i % 2 == 0 else (f"record of {k}",) for i, k in enumerate(keys)]
    # every request is byte for byte the one pyspark's protobuf classes build
    api = store._api
    for raw in server.requests:
        request = messages.StateRequest()
        request.ParseFromString(raw)
        assert request.SerializeToString() == raw
    first_key = api._serialize_to_bytes(key_schema, (keys[0],))
    expected = messages.StateRequest(stateVariableRequest=messages.StateVariableRequest(
        mapStateCall=messages.MapStateCall(stateName="wo_keys", updateValue=messages.UpdateValue(
            userKey=first_key, value=api._serialize_to_bytes(VALUE_SCHEMA, (f"record of {keys[0]}",))))))
    assert server.requests[0] == expected.SerializeToString()


def test_server_errors_are_raised_not_skipped() -> None:
    store, server = _client_and_server(StructType([StructField("key", StringType())]))
    server.fail_with = "disk full"
    with pytest.raises(Exception, match="pipelined map state write: disk full"):
        store.put_many([(("a",), ("x",)), (("b",), ("y",))])


class _FakeValueState:
    """What PendingWrites reads of pyspark's ValueState: its client (schema, api) and its name."""

    def __init__(self, api: Any) -> None:
        self._stateName = "wo_group"
        self._valueStateClient = type("Client", (), {})()
        self._valueStateClient._stateful_processor_api_client = api
        self._valueStateClient.schema = StructType([StructField("meta", StringType())])


def _held(store: PipelinedMap) -> PendingWrites:
    pending = PendingWrites(store._api, store._messages)
    assert store.hold_writes(pending)
    return pending


def test_held_writes_go_with_the_next_read_in_order() -> None:
    store, server = _client_and_server(StructType([StructField("key", StringType())]))
    pending = _held(store)
    store.put_many([(("a",), ("1",)), (("b",), ("2",))])
    pending.update_value(_FakeValueState(store._api), ('{"wm": 5}',))
    pending.change_timer(False, 1_000)
    pending.change_timer(True, 2_000)
    store.remove_many([("a",)])
    assert server.requests == [] and len(pending.requests) == 6  # nothing sent yet
    assert store.get_many([("a",), ("b",)]) == [None, ("2",)]  # the read sees the writes sent before it
    assert len(server.requests) == 8 and pending.requests == []
    assert server.values == [("wo_group", ('{"wm": 5}',))]
    assert server.timers == [("delete", 1_000), ("register", 2_000)]
    store.put_many([(("c",), ("3",))])
    pending.flush()
    assert len(server.requests) == 9 and server.data and pending.requests == []
    pending.flush()  # (nothing waiting: no round trip)
    assert len(server.requests) == 9


def test_at_most_a_chunk_of_writes_waits() -> None:
    store, server = _client_and_server(StructType([StructField("key", LongType())]))
    pending = _held(store)
    store.put_many([((k,), (str(k),)) for k in range(WRITE_CHUNK * 2 + 5)])
    assert len(server.requests) == WRITE_CHUNK * 2 and len(pending.requests) == 5
    pending.flush()
    assert store.get_many([(0,), (WRITE_CHUNK * 2 + 4,)]) == [("0",), (str(WRITE_CHUNK * 2 + 4),)]


def test_a_held_write_the_server_refuses_fails_the_round_trip_that_carries_it() -> None:
    store, server = _client_and_server(StructType([StructField("key", StringType())]))
    pending = _held(store)
    store.put_many([(("a",), ("x",))])
    server.fail_with = "disk full"
    with pytest.raises(Exception, match="pipelined map state write: disk full"):
        pending.flush()
