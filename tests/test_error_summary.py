"""What the CLI prints for an error: the one line that says what went wrong."""
from windowed_operator.error_summary import error_summary

SPARK_TEXT = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted due to stage failure: \
Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0 (TID 5): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/pyspark/worker.py", line 1, in main
    process()
  File "/x/windowed_operator/spark/processor.py", line 296, in handle
    raise BadElementError(exc.reason, record, detail)
windowed_operator.elements.BadElementError: bad element (missing_key): key is null (None); \
element={'user': None, 'ts': 1700000001000} SQLSTATE: 38000

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:1)
\tat org.apache.spark.api.python.PythonRunner$$anon$3.read(PythonRunner.scala:2)
=== Streaming Query ===
Identifier: q [id = 1, runId = 2]
"""


class StreamingQueryException(Exception):
    pass


def test_a_worker_traceback_gives_its_innermost_python_error_without_spark_decoration():
    assert error_summary(StreamingQueryException(SPARK_TEXT)) == (
        "BadElementError: bad element (missing_key): key is null (None); element={'user': None, 'ts': 1700000001000}")


def test_other_errors_give_their_first_line_with_their_type():
    assert error_summary(FileNotFoundError("no such file: data/x.json\nmore")) == "FileNotFoundError: no such file: data/x.json"
    assert error_summary(ValueError("sinks[0]: a foreach_batch sink")) == "ValueError: sinks[0]: a foreach_batch sink"
    assert error_summary(RuntimeError("[STREAM_FAILED] Query q terminated SQLSTATE: XXKST")) == (
        "[STREAM_FAILED] Query q terminated")
