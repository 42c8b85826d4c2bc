"""The ``windowed-operator`` command."""
from __future__ import annotations

import argparse
import sys
from typing import Optional


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="windowed-operator", description="Beam-style windowed operators on Spark")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the clickstream demo on local Spark")
    demo.add_argument("--workdir", help="keep generated data and checkpoints here (default: a temporary directory)")
    demo.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    demo.add_argument("--plot", default="demo-timeline.png",
                      help="where to save one user's pane timeline (PNG; needs matplotlib; '' for none)")
    validate = sub.add_parser("validate", help="check a pipeline file; report every error with its line")
    validate.add_argument("file")
    run = sub.add_parser("run", help="run a pipeline file on Spark (local by default)")
    run.add_argument("file")
    run.add_argument("--master", default=None, help="Spark master (default: local[*], or MASTER from the environment)")
    run.add_argument("--local", action="store_true", help="run in the local runner instead of Spark (small data)")
    args = parser.parse_args(argv)
    if args.command in ("validate", "run"):
        from .pipeline import PipelineError, load_pipeline

        try:
            pipeline = load_pipeline(args.file)
        except PipelineError as exc:
            print(exc, file=sys.stderr)
            return 1
        if args.command == "validate":
            print(f"{args.file}: ok ({len(pipeline.sources)} source(s), {len(pipeline.operators)} operator(s), "
                  f"{len(pipeline.sinks)} sink(s))")
            return 0
        if args.local:
            from .pipeline.local_run import run_pipeline_locally

            run_pipeline_locally(pipeline)
            return 0
        import os

        from .spark.pipeline_run import run_pipeline

        run_pipeline(pipeline, master=args.master or os.environ.get("MASTER"))
        return 0
    if args.command == "demo":
        from .spark.demo import run_demo

        return run_demo(workdir=args.workdir, master=args.master, keep=args.workdir is not None,
                        plot_path=args.plot or None)
    return 2


if __name__ == "__main__":
    sys.exit(main())
