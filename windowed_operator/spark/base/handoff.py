"""How a key group's rows reach the stateful processor: row by row, packed, or sliced; decided here.

pyspark 4.3's ``transformWithStateInPandas`` regroups its input row by row in Python (about 4.6 us a
row, ``packed_input``).  Two handoffs stand in for it:

- **packed** (``packed_input``): the scan stage writes each key group's run of a chunk as one Arrow
  stream in one row, which the processor unpacks; the driver decides it, as it adds a stage pass;
- **sliced** (``sliced_handoff``): the workers, forked by the library's daemon (``WORKER_DAEMON``),
  cut each group's run out of the Arrow batches pyspark reads; nothing changes in the plan, and
  each worker keeps its own guards (pyspark's function as expected, the library's group column, no
  int-extension dtypes), falling back to pyspark's rows where one fails.

``choose_handoff`` is the one decision: packed where ``PACK_CONF`` says so (by default: where the
workers do not slice) and no scan-stage fold already hands few rows; otherwise sliced where the
workers slice, row by row elsewhere.  ``row_by_row`` turns both off for comparisons.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from enum import Enum
from typing import Any, Iterator, Optional

from .settings import read_flag

#: The Spark conf that turns packing on or off.  Unset, input is packed unless the session's workers
#: slice key groups out of Arrow batches (``sliced_handoff``, a local session's daemon), which is
#: faster than packing at every size measured; off, with slicing off too, the processor takes rows
#: one by one from pyspark, as before either existed (for comparison).
PACK_CONF = "spark.windowed_operator.packInput"
#: pyspark's conf making integer columns pandas extension dtypes in the row path: packing keeps to
#: the default conversion, so it steps aside when this is on.
INT_EXTENSION_CONF = "spark.sql.execution.pythonUDF.pandas.preferIntExtensionDtype"
#: The environment variable that turns slicing off in the workers (``false``).
SLICED_HANDOFF_ENV = "WINDOWED_OPERATOR_SLICED_HANDOFF"
#: The setting naming the module of the Python worker daemon, and the library's (``worker_daemon``).
DAEMON_CONF = "spark.python.daemon.module"
WORKER_DAEMON = "windowed_operator.spark.worker_daemon"


class Handoff(str, Enum):
    """How the processor receives a key group's rows (``SLICED``: what the driver expects of the
    workers; a worker whose guards fail takes pyspark's rows instead, which give the same frames)."""

    ROW_BY_ROW = "row by row"
    PACKED = "packed"
    SLICED = "sliced"


def enabled(environ: Optional[dict[str, str]] = None) -> bool:
    """Whether the workers slice (``SLICED_HANDOFF_ENV`` not ``false``, in any case)."""
    return (environ if environ is not None else os.environ).get(SLICED_HANDOFF_ENV, "").strip().lower() != "false"


def workers_slice(conf: Any) -> bool:
    """Whether a session's Python workers slice (``conf``: its ``RuntimeConfig``): they are forked by
    the library's daemon, and slicing is not turned off in their environment."""
    return (conf.get(DAEMON_CONF, None) == WORKER_DAEMON
            and enabled({SLICED_HANDOFF_ENV: str(conf.get(f"spark.executorEnv.{SLICED_HANDOFF_ENV}", None) or "")}))


def choose_handoff(df: Any, folded_in_scan: bool) -> tuple[Handoff, Optional[str]]:
    """The handoff for a stage over ``df`` and the session's time zone (packed timestamps are
    converted in it), from the session's conf (on Spark Connect a conf request, no analysis); where
    the conf cannot be read, row by row.

    A scan-stage fold (``folded_in_scan``) already hands few rows (partials, chains, pre-selected
    rows): packing them is one more Python pass for little (Nexmark, runs interleaved: q7 0.92x with
    it, q5 1.01x, q11's chains 0.92x; where no fold runs, q11 1.09x, q5r 1.13x; those runs are in git
    history, the current figures in benchmarks/results/nexmark_q8_bound_and_packing.txt)."""
    try:
        conf = df.sparkSession.conf
        plain_ints = str(conf.get(INT_EXTENSION_CONF, "false")).lower() != "true"
        timezone = conf.get("spark.sql.session.timeZone", None)
        slicing = workers_slice(conf)
    except Exception:  # noqa: BLE001 - a session without a readable conf: the row path, as before
        return Handoff.ROW_BY_ROW, None
    packed = read_flag(conf, PACK_CONF, default=not slicing) and plain_ints
    if packed and not folded_in_scan:
        return Handoff.PACKED, timezone
    return (Handoff.SLICED if slicing else Handoff.ROW_BY_ROW), timezone


@contextmanager
def row_by_row(spark: Any) -> Iterator[None]:
    """Queries built inside take their rows one by one from pyspark, as before slicing and packing
    existed (for comparison): packing off, and slicing off in the workers their Python functions
    start (Spark keeps a worker daemon per worker environment, which a function takes from its
    session's ``SparkContext.environment`` when it is built)."""
    environment = spark.sparkContext.environment
    environment_before, conf_before = environment.get(SLICED_HANDOFF_ENV), spark.conf.get(PACK_CONF, None)
    environment[SLICED_HANDOFF_ENV] = "false"
    spark.conf.set(PACK_CONF, "false")
    try:
        yield
    finally:
        if environment_before is None:
            environment.pop(SLICED_HANDOFF_ENV, None)
        else:
            environment[SLICED_HANDOFF_ENV] = environment_before
        if conf_before is None:
            spark.conf.unset(PACK_CONF)
        else:
            spark.conf.set(PACK_CONF, conf_before)


__all__ = ["DAEMON_CONF", "INT_EXTENSION_CONF", "PACK_CONF", "SLICED_HANDOFF_ENV", "WORKER_DAEMON", "Handoff",
           "choose_handoff", "enabled", "row_by_row", "workers_slice"]
