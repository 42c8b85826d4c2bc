"""Progress lines: exact per-batch figures from a batch's own progress, readable watermarks."""
import pytest

from windowed_operator.spark import END_OF_INPUT
from windowed_operator.spark.base.progress import batch_line, batch_progress, format_watermark
from windowed_operator.runners.totals import Totals

pytestmark = pytest.mark.spark


def test_batch_figures_come_from_the_operators_observed_metrics_not_the_sink():
    progress = {"name": "q", "batchId": 3, "numInputRows": 144, "durationMs": {"triggerExecution": 1234},
                "eventTime": {"watermark": "2026-01-01T00:04:19.435Z"},
                "sink": {"numOutputRows": -1},  # foreachBatch reports none; late rows would inflate it
                "observedMetrics": {"windowed_operator sessions": {"late_rows_dropped": 2, "bad_rows": 1, "panes": 71},
                                    "windowed_operator pages": {"late_rows_dropped": 1, "bad_rows": 0, "panes": 24},
                                    "user metric": {"panes": 1000}}}
    batch = batch_progress(progress)
    assert (batch.batch_id, batch.input_rows, batch.panes, batch.late_rows_dropped, batch.bad_rows) == (3, 144, 95, 3, 1)
    assert batch.watermark_ms == 1_767_225_859_435 and batch.duration_ms == 1234
    totals = Totals(panes=100)
    totals.add(batch.panes, batch.late_rows_dropped, batch.bad_rows, batch.input_rows)
    assert batch_line(batch, totals) == ("q: batch 3: 144 rows in, 95 panes out (195 so far), 3 late rows dropped, "
                                         "1 bad rows, watermark 2026-01-01 00:04:19.435 (1.2 s)")


def test_the_end_of_input_marker_row_is_no_row_in():
    """The marker row only ends the input (``drop_end_of_input`` counts it under its own observation):
    the batch's rows in leave it out, and its observation adds no pane, drop or watermark."""
    progress = {"name": "q", "batchId": 9, "numInputRows": 3, "durationMs": {"triggerExecution": 10},
                "observedMetrics": {"windowed_operator sessions": {"late_rows_dropped": 0, "bad_rows": 0, "panes": 4},
                                    "windowed_operator end of input 1": {"end_of_input_rows": 1}}}
    batch = batch_progress(progress)
    assert (batch.input_rows, batch.panes, batch.late_rows_dropped, batch.operator_watermark_ms) == (2, 4, 0, None)


def test_a_chains_panes_out_are_its_output_operators_and_its_drops_every_stages():
    """In a chain the first stage's panes feed the second, not the sink: the line counts the output
    operator's panes; late and bad rows of every stage add up."""
    progress = {"name": "summary", "batchId": 1, "numInputRows": 10,
                "observedMetrics": {"windowed_operator sessions": {"late_rows_dropped": 2, "bad_rows": 0, "panes": 371},
                                    "windowed_operator summary": {"late_rows_dropped": 1, "bad_rows": 1, "panes": 22}}}
    batch = batch_progress(progress, {"summary": "windowed_operator summary"})
    assert (batch.panes, batch.late_rows_dropped, batch.bad_rows) == (22, 3, 1)
    assert batch_progress(progress, {"other query": "windowed_operator sessions"}).panes == 393


def test_a_per_partition_watermark_shows_the_operators_watermark_and_the_partition_holding_it_back():
    """Spark's watermark runs ahead of a per-partition one: the line shows the operator's, and the
    partition that holds it back with its lag (a batch where no group ran reports Spark's)."""
    progress = {"name": "q", "batchId": 7, "numInputRows": 4, "durationMs": {"triggerExecution": 500},
                "eventTime": {"watermark": "2026-01-01T00:04:19.435Z"},
                "observedMetrics": {"windowed_operator counts": {
                    "late_rows_dropped": 0, "bad_rows": 0, "panes": 2, "watermark_ms": 1_767_225_600_000,
                    "held_back_by": "1", "held_back_lag_ms": 13_500}}}
    batch = batch_progress(progress)
    assert (batch.operator_watermark_ms, batch.held_back_by, batch.held_back_lag_ms) == (1_767_225_600_000, "1", 13_500)
    assert batch_line(batch, Totals()).endswith(
        "watermark 2026-01-01 00:00:00.000 held back by partition 1 (13.5 s behind) (0.5 s)")
    # a chain's output stage reports the watermark it follows; the first stage, the partition holding it back
    progress["observedMetrics"]["windowed_operator total"] = {
        "late_rows_dropped": 0, "bad_rows": 0, "panes": 1, "watermark_ms": 1_767_225_600_000, "held_back_by": None,
        "held_back_lag_ms": None}
    chained = batch_progress(progress, {"q": "windowed_operator total"})
    assert (chained.panes, chained.held_back_by, chained.held_back_lag_ms) == (1, "1", 13_500)
    del progress["observedMetrics"]["windowed_operator total"]
    progress["observedMetrics"]["windowed_operator counts"].update(watermark_ms=None, held_back_by=None)
    assert batch_line(batch_progress(progress), Totals()).endswith("watermark 2026-01-01 00:04:19.435 (0.5 s)")


@pytest.mark.parametrize("ms, text", [(None, "none yet"), (0, "none yet"), (1, "1970-01-01 00:00:00.001"),
                                      (1_767_225_859_435, "2026-01-01 00:04:19.435"),
                                      (END_OF_INPUT - 10_000, "end of input"), (END_OF_INPUT, "end of input")])
def test_watermarks_print_as_times_or_say_what_they_mean(ms, text):
    assert format_watermark(ms) == text
