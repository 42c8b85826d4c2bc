"""One SparkSession for the whole test run (starting Spark costs about 10 s).  The JVM's stderr (Spark's
log, the stream threads' uncaught errors, the Python workers' messages) goes to a file of the run's own
(``spark_log``), which tests read; a failed run's log is kept under pytest's temporary directory."""
import pytest


@pytest.fixture(scope="session")
def spark_log(tmp_path_factory):
    return tmp_path_factory.mktemp("spark-log") / "spark.log"


@pytest.fixture(scope="session")
def spark(spark_log):
    from windowed_operator.spark.base.session import local_session

    session = local_session(master="local[2]", app_name="windowed-operator-tests", shuffle_partitions=2,
                            spark_log=str(spark_log))
    yield session
    session.stop()
