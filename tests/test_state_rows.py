"""UnsafeRow bytes of the operator's state variables (``windowed_operator.spark.base.state_rows``), without a
JVM.  The bytes of every stored layout read and written back: ``tests/spark/test_state_rows.py``."""
import struct

from windowed_operator.spark.base.state_rows import GroupContents, encode_row, group_rows, read_groups, string_field


def test_an_unsafe_row_is_a_bitset_fixed_slots_and_padded_variable_bytes():
    row = encode_row(["abc", 7, None])
    assert len(row) == 8 + 3 * 8 + 8
    assert row[0] == 0b100, "the null field's bit"
    assert struct.unpack_from("<Q", row, 8)[0] == (32 << 32 | 3), "offset << 32 | size"
    assert struct.unpack_from("<q", row, 16)[0] == 7
    assert row[32:35] == b"abc" and row[35:] == b"\0" * 5
    assert string_field(encode_row(["é{}"])) == "é{}"
    assert string_field(encode_row([None])) is None


def test_a_groups_contents_round_trip_through_rows_with_bigint_or_int_groups():
    contents = GroupContents(meta='{"wm":1}', parts={("keys", 0, 0): '"a"\t[1,null,[]]', ("event", 17, 2): "[]"},
                             key_rows={encode_row(["a"]): "[1,null,[]]"},
                             timers={"$eventTimers": {1_767_225_615_000, 5}, "$procTimers": {9}})
    for group, int_typed in ((12, False), (7, True), (2 ** 40, False), (-3, True)):
        rows = group_rows(group, contents, int_typed)
        assert len(rows) == 1 + 2 + 1 + 3 * 2
        assert read_groups(rows, int_typed) == {group: contents}
