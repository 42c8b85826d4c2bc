"""The site hook of the Python processes Spark starts for a local session (see ``worker_site``).

Runs before anything imports pyspark: it moves Spark's zips behind the installed pyspark, then runs
the ``sitecustomize`` this one shadows (a distribution's, a coverage tool's), if there is one, so
that nothing the environment set up is lost.  It never stops a process from starting: if the path
cannot be read, the path stays as Spark gave it.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _installed_pyspark_first() -> None:
    location = os.path.join(os.path.dirname(_HERE), "pyspark_path.py")
    try:  # by file path: importing the library's packages here would cost every process their imports
        spec = importlib.util.spec_from_file_location("_windowed_operator_pyspark_path", location)
        assert spec is not None and spec.loader is not None  # (a .py file's location: a spec with a loader)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.path[:] = module.installed_pyspark_first(sys.path)
    except Exception:  # noqa: BLE001 - a slower start, never a failed one
        pass


def _run_shadowed_sitecustomize() -> None:
    here = os.path.realpath(_HERE)  # (real paths: a link to this directory must not find this file again)
    others = [entry for entry in sys.path if os.path.realpath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None or spec.origin is None \
            or os.path.realpath(spec.origin) == os.path.realpath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_installed_pyspark_first()
_run_shadowed_sitecustomize()
