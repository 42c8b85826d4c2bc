"""What one record costs in each of transformWithState's state shapes, from Python: pipelined
MapState gets and puts (a record per key: today's per-key layout), a ListState read and written
whole, and one ValueState holding every record as one JSON text.

    python benchmarks/state_call_costs.py [--records 5000] [--batches 6]

One key group, one task; each micro-batch reads what the previous one wrote in every shape, then
writes ``--records`` records of about 120 bytes.  Prints each batch's milliseconds per shape and
the medians over the batches after the first (which reads nothing).  The question it answers: how
much a layout that keeps many keys' records in one stored text would save per record against one
request per key (``windowed_operator.spark.worker.pipelined_map``).

Results are recorded in ``benchmarks/results/state_call_costs.txt`` (``... | tee benchmarks/results/state_call_costs.txt``),
its headline figures in ``benchmarks/results/INDEX.md``; earlier runs are in git history.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pandas as pd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5_000)
    parser.add_argument("--batches", type=int, default=6)
    args = parser.parse_args()

    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    from windowed_operator.spark import local_session
    from windowed_operator.spark.worker.pipelined_map import PipelinedMap

    work = Path(tempfile.mkdtemp(prefix="state-costs-"))
    times_file = work / "times.jsonl"
    n = args.records

    class Probe(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.map = PipelinedMap(handle.getMapState("per_key", "key bigint", "record string"))
            self.list = handle.getListState("whole_list", "key bigint, record string")
            self.text = handle.getValueState("one_text", "records string")

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
            batch = int(next(iter(rows))["b"].iloc[0])
            record = json.dumps({"state": {"starts": [1, 2], "ends": [3, 4], "acc": [[5]]}, "due": [123456789, None]})
            keys = [(i,) for i in range(n)]
            marks = [time.perf_counter()]
            found = self.map.get_many(keys)
            marks.append(time.perf_counter())
            self.map.put_many([(k, (record,)) for k in keys])
            marks.append(time.perf_counter())
            listed = list(self.list.get())
            marks.append(time.perf_counter())
            self.list.put([(i, record) for i in range(n)])
            marks.append(time.perf_counter())
            old = self.text.get()
            parsed = json.loads(old[0]) if old is not None else []
            marks.append(time.perf_counter())
            self.text.update((json.dumps([[i, record] for i in range(n)]),))
            marks.append(time.perf_counter())
            spent = [1e3 * (b - a) for a, b in zip(marks, marks[1:])]
            with times_file.open("a") as out:
                out.write(json.dumps({"batch": batch, "ms": spent,
                                      "read": [sum(f is not None for f in found), len(listed), len(parsed)]}) + "\n")
            yield pd.DataFrame({"k": [key[0]]})

        def close(self) -> None:
            pass

    spark = local_session(app_name="state-call-costs", shuffle_partitions=1, spark_log=str(work / "spark.log"))
    source = work / "in"
    source.mkdir()
    for b in range(args.batches):  # (modification times in order: Spark's file source reads by them)
        path = source / f"{b:04d}.json"
        path.write_text(json.dumps({"k": 0, "b": b}) + "\n")
        os.utime(path, (1_600_000_000 + b, 1_600_000_000 + b))
    df = spark.readStream.schema("k bigint, b bigint").option("maxFilesPerTrigger", 1).json(str(source))
    out = df.groupBy("k").transformWithStateInPandas(Probe(), "k bigint", "Append", "None")
    (out.writeStream.format("noop").option("checkpointLocation", str(work / "checkpoint"))
     .trigger(availableNow=True).start().awaitTermination())
    spark.stop()

    names = ["map get", "map put", "list get", "list put", "text get+parse", "text encode+put"]
    results = sorted((json.loads(line) for line in times_file.read_text().splitlines()), key=lambda r: r["batch"])
    print(f"{n:,} records of ~120 bytes, one key group; ms per batch ({', '.join(names)}):")
    for r in results:
        print(f"  batch {r['batch']}: " + "  ".join(f"{ms:7.1f}" for ms in r["ms"]) + f"   (records read: {r['read']})")
    steady = [r["ms"] for r in results if any(r["read"])]  # (the first batch found nothing to read)
    medians = [statistics.median(column) for column in zip(*steady)]
    print("median over the batches that read: " + ", ".join(f"{name} {ms:.1f} ms ({1e3 * ms / n:.1f} us a record)"
                                               for name, ms in zip(names, medians)))
    print(f"per-key map read+write against one text read+write: {(medians[0] + medians[1]) / (medians[4] + medians[5]):.1f}x")


if __name__ == "__main__":
    main()
