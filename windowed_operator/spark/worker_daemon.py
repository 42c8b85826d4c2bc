"""pyspark's Python worker daemon, with the processor's modules imported before it forks workers.

Spark starts one daemon per executor (``python -m pyspark.daemon pyspark.worker``) and forks a
worker from it for each Python task it runs at once; a new worker then imports whatever the task's
function needs.  The stateful processor pulls in pandas, pyarrow, numpy, pydantic and this library:
0.4-0.6 s of each new worker's time (py-spy on Nexmark q5), paid again by every worker a query
starts.  Imported in the daemon, they are in every forked worker already (copy-on-write pages).

The daemon also imports pyspark from the installed package rather than from the ``pyspark.zip``
Spark puts first on a worker's ``PYTHONPATH`` (see :func:`installed_pyspark_first`).

``local_session`` names this module in ``spark.python.daemon.module`` on a local master, where the
driver's environment is the workers'; on a cluster the executors' Python may not have the library
installed (it may be shipped with the job), so the stock daemon stays.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Optional

#: The daemon's process id, in the daemon and the workers it forked (None in any other process): how
#: a worker can tell that it started with the modules imported.
PRELOADED_BY: Optional[int] = None

_PY4J_ZIP = re.compile(r"py4j-(?P<version>[0-9][0-9A-Za-z.]*)-src\.zip")


def installed_pyspark_first(path: list[str]) -> list[str]:
    """``path`` with the zips of a pip-installed pyspark moved behind everything else.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and ``py4j-*-src.zip`` at the head of every
    Python worker's path.  A zip holds sources only and Python cannot cache their bytecode there,
    so each new Python process compiles pyspark from source: 0.5-0.9 s of CPU per daemon (py-spy on
    Nexmark q11), on the two cores the query runs on.  When pyspark is pip-installed, SPARK_HOME is
    the installed package itself, so the zip is the same release as the package beside it, whose
    bytecode is cached.  A zip is moved only when that package (for py4j: the same version's
    installed distribution) is on ``path`` too; it stays at the end as the fallback.
    """
    normalized = {os.path.normpath(entry) for entry in path}
    moved = [entry for entry in path if _installed_copy_on_path(entry, normalized)]
    return [entry for entry in path if entry not in moved] + moved


def _installed_copy_on_path(entry: str, normalized: set[str]) -> bool:
    name = os.path.basename(entry)
    py4j = _PY4J_ZIP.fullmatch(name)
    if name != "pyspark.zip" and py4j is None:
        return False
    lib = os.path.dirname(os.path.normpath(entry))
    package = os.path.dirname(os.path.dirname(lib))  # <site>/pyspark/python/lib -> <site>/pyspark
    site = os.path.dirname(package)
    if os.path.basename(package) != "pyspark" or site not in normalized \
            or not os.path.isfile(os.path.join(package, "__init__.py")):
        return False
    if py4j is None:
        return True
    return os.path.isfile(os.path.join(site, "py4j", "__init__.py")) and \
        os.path.isdir(os.path.join(site, f"py4j-{py4j['version']}.dist-info"))


def main() -> None:
    sys.path[:] = installed_pyspark_first(sys.path)  # before the first import of pyspark
    import windowed_operator.spark.processor  # noqa: F401 - imported once, for every forked worker
    import windowed_operator.spark.worker_daemon as this  # (run as __main__: the importable module is another)
    from pyspark import daemon

    this.PRELOADED_BY = os.getpid()
    daemon.manager()  # (reads the worker module from sys.argv, as ``python -m pyspark.daemon`` does)


if __name__ == "__main__":
    main()
