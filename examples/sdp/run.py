"""Spark Declarative Pipelines with a windowed operator: ``python examples/sdp/run.py``.

Writes a small click stream (one file per micro-batch, with late clicks and an end-of-input marker row),
a pipeline project (``spark-pipeline.yml`` + ``transformations/click_counts.py``) in a work
directory, runs ``spark-pipelines run`` on it, and prints the streaming table ``click_counts``
next to what the local runner computes for the same batches.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASE = 1_767_225_600_000
END_OF_INPUT = 9_000_000_000_000


def batches(seed: int = 3) -> list[list[dict]]:
    rng = random.Random(seed)
    out = []
    for b in range(6):
        front = BASE + 8_000 * (b + 1)
        out.append([{"user": rng.choice("abc"), "page": rng.choice(["home", "cart"]),
                     "ts": front - rng.randrange(0, 12_000)} for _ in range(6)])
    return out


def write_project(work: Path) -> Path:
    data = work / "clicks"
    data.mkdir(parents=True)
    for i, rows in enumerate([*batches(), [{"end_of_input": True, "ts": END_OF_INPUT}]]):
        path = data / f"part-{i:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    shutil.copytree(HERE / "transformations", work / "transformations")
    (work / "storage").mkdir()
    spec = work / "spark-pipeline.yml"
    spec.write_text(f"""name: windowed_operator_sdp
storage: file://{work / 'storage'}
configuration:
  spark.sql.streaming.stateStore.providerClass: org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider
  spark.sql.shuffle.partitions: "2"
  spark.sql.session.timeZone: UTC
libraries:
  - glob:
      include: transformations/**
""")
    return spec


def local_expected() -> list[tuple]:
    """The same batches through the local runner (watermark = largest event time before - 2 s)."""
    from triggers import TriggerOption
    from accumulations import Count
    from windowed_operator import KeyedWindowedOperator, TimeWindows

    op = KeyedWindowedOperator(
        TimeWindows(10_000), Count(), key="user", timestamp="ts", allowed_lateness=30_000,
        trigger=TriggerOption.at_watermark().with_early_firings_at_every(count=3).with_late_firings_at_every(count=1)
        .accumulating_and_retracting_fired_panes())
    runner = op.local_runner()
    top = None
    for rows in batches():
        if top is not None:
            runner.advance_watermark_to(top - 2_000)
        runner.add_elements(*rows)
        top = max([top or 0, *(r["ts"] for r in rows)])
    runner.advance_watermark_to(top - 2_000)
    runner.finish()
    return sorted((p.key, p.window_start, p.value, p.timing.value, p.index, p.is_retraction)
                  for p in runner.outputs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="where to write the project (default: a temporary directory)")
    args = parser.parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="wo-sdp-"))
    spec = write_project(work)
    env = {**os.environ, "WO_SDP_INPUT": str(work / "clicks")}
    cli = shutil.which("spark-pipelines") or "spark-pipelines"
    result = subprocess.run([cli, "run", "--spec", str(spec)], cwd=work, env=env, capture_output=True, text=True)
    print("\n".join(line for line in result.stdout.splitlines() if "Flow" in line or "Run is" in line))
    if result.returncode != 0:
        print(result.stderr[-4000:], file=sys.stderr)
        return result.returncode
    import pandas as pd

    files = sorted((work / "spark-warehouse" / "click_counts").glob("*.parquet"))
    table = pd.concat(pd.read_parquet(f) for f in files)
    # window_start is UTC (the session time zone): its epoch value is the window start in ms
    got = sorted((r.key, int(pd.Timestamp(r.window_start).value // 1_000_000), int(r.value), r.timing,
                  int(r.pane_index), bool(r.is_retraction)) for r in table.itertuples())
    print(f"streaming table click_counts: {len(table)} rows "
          f"({int(table.is_retraction.sum())} retractions, {int((table.timing == 'LATE').sum())} late panes)")
    same = got == local_expected()
    print(f"{'equal to' if same else 'DIFFERENT FROM'} the local runner on the same batches")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
