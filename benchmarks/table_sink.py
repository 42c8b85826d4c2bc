"""Table sink throughput: rows/s into SQLite, PostgreSQL and DuckDB, and the latency it adds to a micro-batch.

Each batch is what ``foreachBatch`` hands the sink after Spark's ``toArrow()``: an Arrow table of
panes (key, window bounds as UTC timestamps, a bigint value, the pane columns).  Per database and
round, on a fresh table:

- ``insert``: a batch of N panes of new windows (every row inserted),
- ``replace``: N panes of the same windows (ON_TIME after EARLY: every row replaced through the
  upsert's conflict path),
- ``retract``: N retractions and N new panes of those windows (retracting mode: 2N rows in, N rows
  replaced),
- ``delete``: N retractions of merged-away sessions (every row deleted),
- ``empty``: a batch without panes (the progress row alone: the fixed cost per micro-batch).

One warm-up round, then ``--runs`` rounds with the databases interleaved (their order alternating);
figures are medians with the spread (min-max).  ``python share`` is the part of a write spent in
Python (reading the Arrow batch, netting each window, checking every value) rather than in the
database.  SQLite is a file on this machine's disk with its default (full) synchronous commits;
PostgreSQL a server started for the run (tests/postgres_server.py) with fsync off, or ``--postgres-url``;
DuckDB a file on the same disk (when the ``duckdb`` extra is installed).

    python benchmarks/table_sink.py --panes 100000 --runs 3
    python benchmarks/table_sink.py --panes 20000 --runs 3 --out benchmarks/results/table_sink.txt
"""
from __future__ import annotations

import argparse
import datetime as dt
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from timing import spread  # noqa: E402

from windowed_operator.sinks import TableSink, make_engine  # noqa: E402
from windowed_operator.sinks.reading import read_batch as _read_batch  # noqa: E402

UTC = dt.timezone.utc
START = dt.datetime(2026, 1, 1, tzinfo=UTC)
CASES = ("insert", "replace", "retract", "delete", "empty")


def panes(n: int, *, value: int, timing: str, index: int, retraction: bool = False, last: bool = False) -> dict:
    starts = [START + dt.timedelta(seconds=10 * (i % 100)) for i in range(n)]
    return {"key": [f"user{i // 100}" for i in range(n)], "window_start": starts,
            "window_end": [s + dt.timedelta(seconds=10) for s in starts], "value": [value + i % 7 for i in range(n)],
            "timing": [timing] * n, "pane_index": [index] * n, "is_first": [index == 0] * n, "is_last": [last] * n,
            "is_retraction": [retraction] * n, "timestamp": [s + dt.timedelta(seconds=10) for s in starts]}


SCHEMA = pa.schema([("key", pa.string()), ("window_start", pa.timestamp("us", tz="UTC")),
                    ("window_end", pa.timestamp("us", tz="UTC")), ("value", pa.int64()), ("timing", pa.string()),
                    ("pane_index", pa.int32()), ("is_first", pa.bool_()), ("is_last", pa.bool_()),
                    ("is_retraction", pa.bool_()), ("timestamp", pa.timestamp("us", tz="UTC"))])


def batches(n: int) -> dict[str, pa.Table]:
    def table(*parts: dict) -> pa.Table:
        return pa.concat_tables([pa.Table.from_pydict(p, schema=SCHEMA) for p in parts])

    return {
        "insert": table(panes(n, value=1, timing="EARLY", index=0)),
        "replace": table(panes(n, value=2, timing="ON_TIME", index=1)),
        "retract": table(panes(n, value=-2, timing="LATE", index=2, retraction=True),
                         panes(n, value=3, timing="LATE", index=2)),
        "delete": table(panes(n, value=-3, timing="LATE", index=3, retraction=True, last=True)),
        "empty": pa.Table.from_pylist([], schema=SCHEMA),
    }


def one_round(url: str, table: str, data: dict[str, pa.Table]) -> dict[str, tuple[float, float]]:
    """Each case's (write seconds, Python seconds) on a fresh table."""
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        conn.exec_driver_sql("DROP TABLE IF EXISTS windowed_operator_sink_progress")
    engine.dispose()
    sink = TableSink(url, table, columns=["timing", "pane_index", "batch_id"])
    out = {}
    for batch_id, case in enumerate(CASES):
        batch = data[case]
        began = time.perf_counter()
        result = sink.write(batch, batch_id)
        seconds = time.perf_counter() - began
        assert result.applied
        began = time.perf_counter()  # the Python part alone: read, net and check the same batch again
        rows, _, _ = _read_batch(batch)
        sink._net([r for r in rows if r.get("timing") is not None], batch_id)
        out[case] = (seconds, time.perf_counter() - began)
    expected = 0 if "delete" in CASES else len(data["insert"])
    assert len(sink.rows()) == expected
    sink.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--panes", type=int, default=100_000, help="panes per batch (N)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres-url", default=None, help="default: a server started for the run")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()

    server = None
    postgres_url: Optional[str] = args.postgres_url
    if postgres_url is None:
        from postgres_server import PostgresServer, postgres_bin

        bin_dir = postgres_bin()
        if bin_dir is not None:
            server = PostgresServer(bin_dir)
            postgres_url = server.start()
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    try:
        directory = Path(tempfile.mkdtemp(prefix="table-sink-bench-"))
        databases: dict[str, Callable[[], str]] = {"sqlite": lambda: f"sqlite:///{directory / 'bench.db'}"}
        if postgres_url:
            databases["postgresql"] = lambda: postgres_url  # type: ignore[return-value]
        try:
            import duckdb_engine  # noqa: F401

            databases["duckdb"] = lambda: f"duckdb:///{directory / 'bench.duckdb'}"
        except ImportError:
            say("  (no DuckDB driver here: pip install -e '.[duckdb]'; DuckDB not measured)")
        data = batches(args.panes)
        say(f"table sink: {args.panes:,} panes per batch, {args.runs} rounds after a warm-up, databases interleaved "
            f"({platform.python_version()}, {platform.machine()}); {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        if not postgres_url:
            say("  (no PostgreSQL binaries here: PostgreSQL not measured)")
        timings: dict[str, dict[str, list[tuple[float, float]]]] = {db: {c: [] for c in CASES} for db in databases}
        names = list(databases)
        for run in range(args.runs + 1):
            order = names if run % 2 == 0 else list(reversed(names))
            for db in order:
                result = one_round(databases[db](), "bench_results", data)
                if run == 0:
                    continue  # (warm-up)
                for case, pair in result.items():
                    timings[db][case].append(pair)
        for db in names:
            say(f"{db}:")
            for case in CASES:
                seconds = [s for s, _ in timings[db][case]]
                python = [p for _, p in timings[db][case]]
                rows_in = len(data[case])
                s = spread(seconds)
                rate = f"{rows_in / s.median:>10,.0f} rows/s ({rows_in / s.high:,.0f}-{rows_in / s.low:,.0f})" \
                    if rows_in else " " * 10 + " (progress row only)"
                say(f"  {case:<8} {rows_in:>8,} rows in  {s.median * 1000:9.1f} ms ({s.low * 1000:.1f}-"
                    f"{s.high * 1000:.1f}) per batch  {rate}  python share {spread(python).median / s.median:4.0%}")
    finally:
        if server is not None:
            server.stop()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
