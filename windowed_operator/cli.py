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
    for command in (validate, run):  # what a pipeline file may do is the command's decision, not the file's
        command.add_argument("--allow-code", action="store_true",
                             help="let the file import any user code it names (join functions, accumulations, "
                                  "foreach_batch sinks)")
        command.add_argument("--allow-module", action="append", default=[], metavar="PACKAGE.MODULE",
                             help="let the file import user code from this module and its submodules (repeatable)")
        command.add_argument("--allow-outside-paths", action="store_true",
                             help="let the file's sources, sinks and checkpoints lie outside its directory")
    run.add_argument("--master", default=None, help="Spark master (default: local[*], or MASTER from the environment)")
    run.add_argument("--local", action="store_true", help="run in the local runner instead of Spark (small data)")

    def conf_pair(text: str) -> tuple[str, str]:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
        return key.strip(), value

    def py_file_list(text: str) -> list[str]:
        import os  # main() imports os further down: a name of its own there

        files = [f.strip() for f in text.split(",") if f.strip()]
        missing = [f for f in files if "://" not in f and not os.path.exists(f)]
        if missing:
            raise argparse.ArgumentTypeError(f"no such file: {', '.join(missing)}")
        return files

    run.add_argument("--conf", action="append", default=[], type=conf_pair, metavar="KEY=VALUE",
                     help="a Spark setting for the session (repeatable), e.g. --conf spark.executor.memory=2g")
    run.add_argument("--py-files", default=[], type=py_file_list, metavar="A.zip,B.py",
                     help="user code (.py, .zip, .egg; comma-separated) shipped to the driver and executors; the "
                          "library itself is shipped to a cluster (spark://...) automatically")
    state = sub.add_parser("state", help="print the windows each key holds in a checkpoint (pending, fired, trigger "
                                         "state)")
    state.add_argument("checkpoint")
    state.add_argument("--key", help="only this key (compared as text)")
    state.add_argument("--limit", type=int, default=50, help="at most this many keys (default 50)")
    state.add_argument("--operator-id", type=int, default=0, help="the stateful operator in the query (default 0)")
    args = parser.parse_args(argv)
    if args.command == "state":
        from .spark.inspect import describe_checkpoint
        from .spark.session import local_session

        spark = local_session(master="local[1]", app_name="windowed-operator-state")
        for line in describe_checkpoint(spark, args.checkpoint, args.key, args.limit, args.operator_id):
            print(line)
        return 0
    if args.command in ("validate", "run"):
        from .pipeline import CodePolicy, PipelineError, load_pipeline

        code = CodePolicy(allow_all=args.allow_code, modules=tuple(args.allow_module))
        try:
            pipeline = load_pipeline(args.file, code=code, outside_paths=args.allow_outside_paths,
                                     require_inputs=True)
        except PipelineError as exc:
            print(exc, file=sys.stderr)
            return 1
        if args.command == "validate":
            print(f"{args.file}: ok ({len(pipeline.sources)} source(s), {len(pipeline.operators)} operator(s), "
                  f"{len(pipeline.sinks)} sink(s))")
            return 0
        if args.local:
            from .pipeline.local_run import run_pipeline_locally

            try:
                run_pipeline_locally(pipeline)
            except (FileNotFoundError, ValueError) as exc:  # bad elements and missing data: one line, not a traceback
                print(f"{args.file}: {exc}", file=sys.stderr)
                return 1
            return 0
        import os

        from .spark.pipeline_run import run_pipeline

        run_pipeline(pipeline, master=args.master or os.environ.get("MASTER"), conf=dict(args.conf),
                     py_files=args.py_files)
        return 0
    if args.command == "demo":
        from .spark.demo import run_demo

        return run_demo(workdir=args.workdir, master=args.master, keep=args.workdir is not None,
                        plot_path=args.plot or None)
    return 2


if __name__ == "__main__":
    sys.exit(main())
