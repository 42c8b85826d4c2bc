import os
import sys

from hypothesis import settings

sys.path.insert(0, os.path.dirname(__file__))

try:  # without the spark extra (pip install -e ".[test]"), the core tests run and the Spark ones are skipped
    import pyspark  # noqa: F401
except ImportError:
    collect_ignore = ["spark"]

# CI runs a fixed sequence of examples (HYPOTHESIS_PROFILE=ci) so a red build is reproducible;
# local runs explore new random examples each time.
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL server of the test run's own (see tests/postgres_server.py): its SQLAlchemy URL."""
    from postgres_server import PostgresServer, postgres_bin

    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL binaries (initdb, pg_ctl under /usr/lib/postgresql/*/bin): "
                    "apt-get install postgresql (.ci/run does)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip('no PostgreSQL driver: pip install -e ".[postgres]" (psycopg)')
    server = PostgresServer(bin_dir)
    url = server.start()
    yield url
    server.stop()
