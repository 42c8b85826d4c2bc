"""A local session's Python workers start with the processor's modules imported (``worker_daemon``)."""
import pytest

pytestmark = pytest.mark.spark


def test_workers_are_forked_with_the_processor_imported(spark):
    def _imported_already(rows):  # (nested: pickled by value, the workers cannot import the tests)
        import os
        import sys

        import pandas as pd

        from windowed_operator.spark import worker_daemon

        for _ in rows:
            pass
        yield pd.DataFrame({"had": ["windowed_operator.spark.processor" in sys.modules
                                    and worker_daemon.PRELOADED_BY == os.getppid()]})

    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == "windowed_operator.spark.worker_daemon"
    rows = spark.range(4, numPartitions=4).mapInPandas(_imported_already, "had boolean").collect()
    assert [r.had for r in rows] == [True] * 4


def test_a_cluster_session_keeps_the_stock_daemon():
    from windowed_operator.spark.session import session_conf

    assert "spark.python.daemon.module" not in session_conf("spark://host:7077")
    assert session_conf("local[2]")["spark.python.daemon.module"] == "windowed_operator.spark.worker_daemon"
