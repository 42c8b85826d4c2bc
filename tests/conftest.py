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
