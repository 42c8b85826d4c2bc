"""The window log on Spark: the object path under the default trigger with no allowed lateness keeps
its windows' accumulators by window, gives the local runner's panes, and a restart that lowers allowed
lateness to none, or turns the log off, moves the state across layouts."""
import pytest

from accumulations import ToList
from windowed_operator import KeyedWindowedOperator, TimeWindows, bounded_disorder

from .harness import BASE
from .test_pane_log_spark import DELAY, check_log_run, check_restarts_between_layouts

pytestmark = pytest.mark.spark


def hopping_list(lateness=0, **kw):
    return KeyedWindowedOperator(TimeWindows(10_000).slide_by(5_000), ToList("amount"), key="user", timestamp="ts",
                                 watermark=bounded_disorder(DELAY), allowed_lateness=lateness, **kw)


def window_parts(spark, checkpoint):
    from windowed_operator.spark.inspect import window_log_parts

    return [(r["due"], r["part"]) for r in window_log_parts(spark, str(checkpoint)).collect()]


def test_the_window_log_gives_the_local_runners_panes_and_keeps_no_key_records(spark, tmp_path):
    parts, checkpoint = check_log_run(spark, tmp_path, hopping_list(late_data_output=True), window_parts)
    assert {due for due, _ in parts} >= {BASE + 35_000, BASE + 40_000}  # windows still open, by their expiry
    from windowed_operator.spark.inspect import describe_checkpoint

    lines = list(describe_checkpoint(spark, str(checkpoint), key="b"))
    assert lines[0].endswith("1 key(s) with state:") and lines[1].startswith("the window log:")
    assert "  'b': [2023-11-14 22:13:50.000, 22:14:00.000) acc=[4] elements=1" in lines  # BASE + 30 s, + 40 s
    assert lines[-1] == "key groups: 16 over 2 state partitions (placed by Spark's hash of the group number)"


def test_a_restart_that_changes_the_layout_moves_the_state_between_layouts(spark, tmp_path):
    """Per key (lateness 5 s) -> window log (none) -> per key (the log turned off) on one checkpoint."""
    check_restarts_between_layouts(spark, tmp_path, hopping_list, window_parts)
