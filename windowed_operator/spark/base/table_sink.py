"""What the table sink needs of a Spark micro-batch: its rows as Arrow, and the streaming query's id.

``windowed_operator.sinks.TableSink`` takes a ``foreachBatch`` DataFrame by duck typing and calls
this only when it is handed one; the query id (kept in the checkpoint, so a restarted query has the
same one) scopes the batch ids the sink has applied.
"""
from __future__ import annotations

from typing import Any, Optional

import pyarrow as pa

#: The local property Spark's stream execution sets on the thread that runs a micro-batch.
QUERY_ID_PROPERTY = "sql.streaming.queryId"


def read_spark_batch(df: Any) -> tuple[pa.Table, Optional[str]]:
    """The batch's rows (collected to the driver as Arrow: timestamps as UTC instants, structs as
    dicts) and the id of the streaming query running it (None where the session cannot tell, e.g.
    Spark Connect)."""
    try:
        table = df.toArrow()
    except Exception as error:  # noqa: BLE001 - the query's source or operator failed: say what, in one line
        from .errors import interrupted, raise_query_failed, raise_query_stopped

        if interrupted(error):  # (query.stop() while the sink read the batch)
            raise_query_stopped(error, "while the table sink read its micro-batch")
        raise_query_failed(error, "met while the table sink read its micro-batch: the query's source or operator "
                                  "failed, not the sink")
    try:
        query = df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
    except Exception:  # noqa: BLE001 - no JVM context here (Spark Connect): the sink's own query_id applies
        query = None
    return table, query


__all__ = ["QUERY_ID_PROPERTY", "read_spark_batch"]
