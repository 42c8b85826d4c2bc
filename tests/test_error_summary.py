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


PY4J_TEXT = """An error occurred while calling o334.getResult.
: org.apache.spark.SparkException: Exception thrown in awaitResult: \n\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:56)
\tat java.base/java.lang.Thread.run(Thread.java:840)
Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH] Encountered error \
while reading file file:///in/bad.parquet. Data type mismatches when reading Parquet column [amount]. Expected Spark \
type bigint, actual Parquet type BINARY. SQLSTATE: KD001
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.failedToReadDataFileError(QueryExecutionErrors.scala:1)
Caused by: org.apache.spark.sql.execution.datasources.SchemaColumnConvertNotSupportedException: column: [amount], \
physicalType: BINARY, logicalType: bigint
"""


class Py4JJavaError(Exception):
    pass


def test_a_py4j_calls_error_gives_its_first_spark_error_class_message_not_the_call():
    """A source file's type mismatch met in ``df.toArrow()`` (the table sink's read): the call's line
    names only the call; the cause is the first error-class message of the chain."""
    assert error_summary(Py4JJavaError(PY4J_TEXT)) == (
        "[FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH] Encountered error while reading file "
        "file:///in/bad.parquet. Data type mismatches when reading Parquet column [amount]. Expected Spark type "
        "bigint, actual Parquet type BINARY.")
    no_class = PY4J_TEXT.split("Caused by: org.apache.spark.SparkException")[0] + (
        "Caused by: java.io.IOException: disk on fire\n")
    assert error_summary(Py4JJavaError(no_class)) == "disk on fire"
