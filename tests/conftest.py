import os
import sys

from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

try:  # without the spark extra (pip install -e ".[test]"), the core tests run and the Spark ones are skipped
    import pyspark  # noqa: F401
except ImportError:
    collect_ignore = ["spark"]

# CI runs a fixed sequence of examples (HYPOTHESIS_PROFILE=ci) so a red build is reproducible;
# local runs explore new random examples each time.  Neither fails a test for time alone: no deadline
# per example (Hypothesis' default, 200 ms, is exceeded by a plain example on a loaded 2-core
# machine) and no too_slow health check; what the examples assert is unchanged.
NOT_TIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", derandomize=True, **NOT_TIMED)
settings.register_profile("default", **NOT_TIMED)
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

#: Test files that take minutes each (drivers started and SIGKILLed, a standalone cluster, the README's
#: commands in a new venv), collected first: with ``-n 2 --dist loadfile --no-loadscope-reorder``
#: (pyproject) a file runs on one worker, files in the order collected; xdist's default order (files
#: with the most tests first) put these few-test files last, where they ran alone (the tail of CI).
SLOW_FILES = ("test_verify_restarts.py", "test_cluster.py", "test_readme_commands.py", "test_table_sink_crash.py",
              "test_pipeline_ctrl_c.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(SLOW_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FILES)))  # (stable: the rest keep their order)
