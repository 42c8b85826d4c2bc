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
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .spark.demo import run_demo

        return run_demo(workdir=args.workdir, master=args.master, keep=args.workdir is not None)
    return 2


if __name__ == "__main__":
    sys.exit(main())
