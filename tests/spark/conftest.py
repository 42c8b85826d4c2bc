"""One SparkSession for the whole test run (starting Spark costs about 10 s)."""
import pytest


@pytest.fixture(scope="session")
def spark():
    from windowed_operator.spark.session import local_session

    session = local_session(master="local[2]", app_name="windowed-operator-tests", shuffle_partitions=2)
    yield session
    session.stop()
