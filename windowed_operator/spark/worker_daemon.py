"""pyspark's Python worker daemon, with the processor's modules imported before it forks workers.

Spark starts one daemon per executor (``python -m pyspark.daemon pyspark.worker``) and forks a
worker from it for each Python task it runs at once; a new worker then imports whatever the task's
function needs.  The stateful processor pulls in pandas, pyarrow, numpy, pydantic and this library:
0.4-0.6 s of each new worker's time (py-spy on Nexmark q5), paid again by every worker a query
starts.  Imported in the daemon, they are in every forked worker already (copy-on-write pages).

The daemon also imports pyspark from the installed package rather than from the ``pyspark.zip``
Spark puts first on a worker's ``PYTHONPATH`` (``pyspark_path``).

Before forking, it also installs ``sliced_handoff``: a worker then hands the library's processors
each key group's rows as slices of Arrow batches, not row by row.

``local_session`` names this module in ``spark.python.daemon.module`` on a local master, where the
driver's environment is the workers'; on a cluster the executors' Python may not have the library
installed (it may be shipped with the job), so the stock daemon stays.
"""
from __future__ import annotations

import os
import sys
from typing import Optional

from .base.pyspark_path import installed_pyspark_first

#: The daemon's process id, in the daemon and the workers it forked (None in any other process): how
#: a worker can tell that it started with the modules imported.
PRELOADED_BY: Optional[int] = None

def main() -> None:
    sys.path[:] = installed_pyspark_first(sys.path)  # before the first import of pyspark
    import windowed_operator.spark.worker.processor  # noqa: F401 - imported once, for every forked worker
    import windowed_operator.spark.worker_daemon as this  # (run as __main__: the importable module is another)
    from pyspark import daemon

    from windowed_operator.spark.worker.sliced import install

    install()  # (before the fork: every worker regroups by slices)
    this.PRELOADED_BY = os.getpid()
    daemon.manager()  # (reads the worker module from sys.argv, as ``python -m pyspark.daemon`` does)


if __name__ == "__main__":
    main()
