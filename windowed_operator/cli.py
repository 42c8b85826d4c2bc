"""The ``windowed-operator`` command."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, MutableMapping, Optional

from ._version import __version__

if TYPE_CHECKING:
    from .pipeline import Pipeline

#: What a shell reports for a program stopped by Ctrl-C (128 + SIGINT).
EXIT_INTERRUPTED = 130


def spark_log_path(name: str) -> str:
    """Where a command sends Spark's console output unless --debug: one file per run."""
    directory = Path(tempfile.gettempdir()) / "windowed-operator"
    directory.mkdir(parents=True, exist_ok=True)
    return str(directory / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")


def _missing_spark(label: str) -> Optional[int]:
    """A core-only install (``pip install windowed-operator`` without the spark extra) has no pyspark:
    say how to get it instead of an import error."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is not None:
        return None
    print(f"{label}: running on Spark needs pyspark: pip install 'windowed-operator[spark]' "
          "(or run a pipeline file with --local)", file=sys.stderr)
    return 1


def _run_reporting_errors(label: str, debug: bool, spark_log: Optional[str], body: Callable[[], int]) -> int:
    """Run a Spark command: an error is one or two lines (the traceback with --debug), Ctrl-C exits 130,
    a run stopped by SIGTERM 143 (128 + the signal's number, as a shell reports it)."""
    try:
        return body()
    except KeyboardInterrupt as stop:  # (a run's Stopped names its signal)
        signum = getattr(stop, "signum", None)
        return 128 + signum if isinstance(signum, int) else EXIT_INTERRUPTED
    except BrokenPipeError:
        raise  # the reader of our output left (| head): main() ends quietly
    except Exception as exc:  # noqa: BLE001 - every failure of a command ends as a message and an exit code
        if debug:
            raise
        from .error_summary import error_summary

        print(f"{label}: {error_summary(exc)}", file=sys.stderr)
        where = f"; Spark's log: {spark_log}" if spark_log else ""
        print(f"(run again with --debug for the full traceback{where})", file=sys.stderr)
        return 1


def main(argv: Optional[list[str]] = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `windowed-operator run ... | head`: the reader left; not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


#: Where the demo saves its pane timeline: not the current directory (a checkout's root, in the Quickstart).
DEMO_PLOT = os.path.join(tempfile.gettempdir(), "windowed-operator-demo-timeline.png")


def _main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in ("state", "demo", "repartition", "rescale", "verify-restarts") or \
            (args.command == "run" and not args.local):
        refused = _missing_spark(getattr(args, "file", None) or args.command)
        if refused is not None:
            return refused
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "state": _state, "validate": _pipeline, "run": _pipeline, "demo": _demo, "repartition": _move_checkpoint,
        "rescale": _move_checkpoint, "ship": _ship, "verify-restarts": _verify_restarts}
    return commands[args.command](args)


def _verify_restarts(args: argparse.Namespace) -> int:
    """0: the outputs are equal; 1: they differ; 2: the file cannot be verified (it says why)."""
    pipeline = _load_pipeline_file(args)
    if pipeline is None:
        return 2
    from .spark.verify import refusals, verify_restarts

    refused = refusals(pipeline)
    if refused:
        print(f"{args.file}: verify-restarts cannot compare its runs:", *[f"  {why}" for why in refused], sep="\n",
              file=sys.stderr)
        return 2
    if args.kills < 0:
        print(f"--kills must be 0 or more, not {args.kills}", file=sys.stderr)
        return 2
    if not args.master.startswith("local"):
        print(f"--master {args.master}: verify-restarts kills the driver and its local executors; give a local "
              "master", file=sys.stderr)
        return 2
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="wo-verify-"))
    env = dict(os.environ)
    _beside_the_file(args.file, env)
    print(f"verify-restarts {args.file}: {args.kills} kill(s); the runs under {workdir}", flush=True)
    verdict = verify_restarts(pipeline, args.kills, workdir, master=args.master, conf=dict(args.conf),
                              seed=args.seed, env=env, say=lambda line: print(line, flush=True))
    for line in verdict.lines():
        print(line)
    return 0 if verdict.equal else 1


def _ship(args: argparse.Namespace) -> int:
    from .spark.base.shipping import library_zip

    print(library_zip(args.dir))
    return 0


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _py_file_list(text: str) -> list[str]:
    files = [f.strip() for f in text.split(",") if f.strip()]
    missing = [f for f in files if "://" not in f and not os.path.exists(f)]
    if missing:
        raise argparse.ArgumentTypeError(f"no such file: {', '.join(missing)}")
    return files


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="windowed-operator", description="Beam-style windowed operators on Spark")
    parser.add_argument("--version", action="version", version=f"windowed-operator {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the clickstream demo on local Spark")
    demo.add_argument("--workdir", help="keep generated data and checkpoints here (default: a temporary directory)")
    demo.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    demo.add_argument("--plot", default=DEMO_PLOT,
                      help=f"where to save one user's pane timeline (PNG; needs matplotlib; '' for none; default "
                           f"{DEMO_PLOT})")
    validate = sub.add_parser("validate", help="check a pipeline file; report every error with its line")
    validate.add_argument("file")
    run = sub.add_parser("run", help="run a pipeline file on Spark (local by default)")
    run.add_argument("file")
    verify = sub.add_parser(
        "verify-restarts", help="run a pipeline file once uninterrupted and once SIGKILLed N times (restarting "
                                "from its checkpoint each time), and compare its sinks' outputs")
    verify.add_argument("file")
    verify.add_argument("--kills", type=int, default=3, help="SIGKILLs of the driver at random moments (default 3)")
    verify.add_argument("--seed", type=int, default=None, help="the random moments' seed")
    verify.add_argument("--workdir", default=None,
                        help="where the two runs' checkpoints and outputs go (default: a new temporary directory)")
    verify.add_argument("--master", default="local[2]", help="Spark master, a local one (default: local[2])")
    for command in (validate, run, verify):  # what a pipeline file may do is the command's decision, not the file's
        command.add_argument("--allow-code", action="store_true",
                             help="let the file import any user code it names (join functions, accumulations, "
                                  "foreach_batch sinks)")
        command.add_argument("--allow-module", action="append", default=[], metavar="PACKAGE.MODULE",
                             help="let the file import user code from this module and its submodules (repeatable)")
        command.add_argument("--allow-outside-paths", action="store_true",
                             help="let the file's sources, sinks and checkpoints lie outside its directory")
    run.add_argument("--master", default=None, help="Spark master (default: local[*], or MASTER from the environment)")
    run.add_argument("--local", action="store_true", help="run in the local runner instead of Spark (small data)")
    run.add_argument("--py-files", default=[], type=_py_file_list, metavar="A.zip,B.py",
                     help="user code (.py, .zip, .egg; comma-separated) shipped to the driver and executors; the "
                          "library itself is shipped to a cluster (spark://...) automatically")
    ship = sub.add_parser("ship", help="build the library's zip for spark-submit --py-files (the three packages, "
                                       ".py files only, cached by content) and print its path")
    ship.add_argument("--dir", help="where to write it (default: ~/.cache/windowed-operator)")
    state = sub.add_parser("state", help="print the windows each key holds in a checkpoint (pending, fired, trigger "
                                         "state)")
    state.add_argument("checkpoint")
    state.add_argument("--key", help="only this key (compared as text)")
    state.add_argument("--limit", type=int, default=50, help="at most this many keys (default 50)")
    state.add_argument("--operator-id", type=int, default=0, help="the stateful operator in the query (default 0)")
    repartition = sub.add_parser(
        "repartition", help="move a stopped query's state to another number of state partitions (a cluster of "
                            "another size); Spark 4.2+")
    repartition.add_argument("--partitions", type=int, required=True, help="the new number of state partitions")
    rescale = sub.add_parser(
        "rescale", help="move a stopped query's state to another number of key groups (the most tasks its "
                        "stateful work spreads over); a restart told the checkpoint goes on with them")
    rescale.add_argument("--key-groups", type=int, required=True, help="the new number of key groups")
    for command in (repartition, rescale):
        command.add_argument("checkpoint", help="the query's checkpointLocation")
        command.add_argument("--file-sink", action="append", default=[], metavar="PATH",
                             help="the output path of a Spark file sink the query writes (repeatable): its log "
                                  "gets the new batch")
        command.add_argument("--quiet-seconds", type=float, default=60.0,
                             help="refuse a checkpoint whose last batch committed more recently (default 60: its "
                                  "query may be running); 0 once you know it is stopped")
        command.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    for command in (run, repartition, rescale, verify):
        command.add_argument("--conf", action="append", default=[], type=_conf_pair, metavar="KEY=VALUE",
                             help="a Spark setting for the session (repeatable), e.g. --conf spark.executor.memory=2g")
    for command in (demo, run, state, repartition, rescale):
        command.add_argument("--debug", action="store_true",
                             help="show Spark's console output and full tracebacks (default: Spark's output goes "
                                  "to a log file, errors print as one line)")
    return parser


def _state(args: argparse.Namespace) -> int:
    spark_log = None if args.debug else spark_log_path("state")

    def show_state() -> int:
        from .spark.inspect import describe_checkpoint
        from .spark.base.session import local_session

        spark = local_session(master="local[1]", app_name="windowed-operator-state", spark_log=spark_log)
        for line in describe_checkpoint(spark, args.checkpoint, args.key, args.limit, args.operator_id):
            print(line)
        return 0

    return _run_reporting_errors(args.checkpoint, args.debug, spark_log, show_state)


def _move_checkpoint(args: argparse.Namespace) -> int:
    """``repartition`` (another number of state partitions) and ``rescale`` (another number of key groups)."""
    spark_log = None if args.debug else spark_log_path(args.command)

    def move() -> int:
        from .spark.base.checkpoint_record import local_directory
        from .spark.repartition import check_stopped, repartition_checkpoint
        from .spark.rescale import rescale_checkpoint
        from .spark.base.session import local_session

        if local_directory(args.checkpoint) is not None and all(local_directory(p) is not None for p in args.file_sink):
            check_stopped(args.checkpoint, args.quiet_seconds, tuple(args.file_sink))  # (before Spark starts)

        spark = local_session(master=args.master, app_name=f"windowed-operator-{args.command}", spark_log=spark_log,
                              extra_conf=dict(args.conf))
        options = {"file_sinks": tuple(args.file_sink), "quiet_seconds": args.quiet_seconds}
        done = repartition_checkpoint(spark, args.checkpoint, args.partitions, **options) \
            if args.command == "repartition" else rescale_checkpoint(spark, args.checkpoint, args.key_groups, **options)
        for line in done.lines():
            print(line)
        return 0

    return _run_reporting_errors(args.checkpoint, args.debug, spark_log, move)


def _load_pipeline_file(args: argparse.Namespace) -> Optional[Pipeline]:
    """The pipeline file, loaded as the command's options allow (None: its errors printed)."""
    from .pipeline import CodePolicy, PipelineError, load_pipeline

    code = CodePolicy(allow_all=args.allow_code, modules=tuple(args.allow_module))
    try:
        return load_pipeline(args.file, code=code, outside_paths=args.allow_outside_paths, require_inputs=True)
    except PipelineError as exc:
        print(exc, file=sys.stderr)
        return None


def _beside_the_file(file: str, environ: MutableMapping[str, str]) -> None:
    """Put the pipeline file's directory first on ``PYTHONPATH``: Spark's local Python workers (which
    take the driver's environment) find user modules next to the file, as the driver does."""
    environ["PYTHONPATH"] = os.pathsep.join(
        [str(Path(file).resolve().parent), *filter(None, environ.get("PYTHONPATH", "").split(os.pathsep))])


def _pipeline(args: argparse.Namespace) -> int:
    pipeline = _load_pipeline_file(args)
    if pipeline is None:
        return 1
    if args.command == "validate":
        print(f"{args.file}: ok ({len(pipeline.sources)} source(s), {len(pipeline.operators)} operator(s), "
              f"{len(pipeline.sinks)} sink(s))")
        return 0
    if args.local:
        def run_locally() -> int:
            from .pipeline.local_run import run_pipeline_locally

            run_pipeline_locally(pipeline)
            return 0

        return _run_reporting_errors(args.file, args.debug, None, run_locally)
    spark_log = None if args.debug else spark_log_path(pipeline.name)

    def run_on_spark() -> int:
        from .spark.pipeline_run import run_pipeline
        from .spark.base.session import is_local_master

        master = args.master or os.environ.get("MASTER")
        if is_local_master(master or "local"):  # (before the JVM starts; a cluster's workers need --py-files)
            _beside_the_file(args.file, os.environ)
        if spark_log:
            print(f"Spark's log: {spark_log}", flush=True)
        run_pipeline(pipeline, master=master, conf=dict(args.conf), py_files=args.py_files, spark_log=spark_log)
        return 0

    return _run_reporting_errors(args.file, args.debug, spark_log, run_on_spark)


def _demo(args: argparse.Namespace) -> int:
    spark_log = None if args.debug else spark_log_path("demo")

    def demo_on_spark() -> int:
        from .spark.demo import run_demo

        return run_demo(workdir=args.workdir, master=args.master, keep=args.workdir is not None,
                        plot_path=args.plot or None, spark_log=spark_log)

    return _run_reporting_errors("demo", args.debug, spark_log, demo_on_spark)

if __name__ == "__main__":
    sys.exit(main())
