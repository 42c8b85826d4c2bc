"""Shipping the library to a cluster's executors.

On a cluster (standalone, YARN, Kubernetes) the executors' Python workers import ``windowed_operator``
(and ``triggers``, ``accumulations``) to run the operator's stateful processor: unless the library is
installed on every node, it must be shipped with the application.  :func:`library_zip` builds one zip of
the three packages (``.py`` files only) whose name holds a hash of its content, so reruns reuse it;
:func:`ship_library` adds it to a running session (``SparkContext.addPyFile``: every executor's Python
workers, TransformWithStateInPandas's included, put it on their path), and :func:`shipping_conf` gives the ``spark.submit.pyFiles`` setting
for a session not started yet.  ``python -m windowed_operator.spark.base.shipping`` builds the zip and prints
its path, for ``spark-submit --py-files``.

Shipped files reach the executors' Python workers, not the one TransformWithStateInPandas starts on the
driver (for the first batch of each query, with the driver's PYSPARK_PYTHON and the driver JVM's
PYTHONPATH): there the library must be importable already, installed or on PYTHONPATH, as it is for
``windowed-operator run``; with ``spark-submit``, put the zip on PYTHONPATH too.
"""
from __future__ import annotations

import hashlib
import importlib
import os
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterable, Optional, Union

PACKAGES = ("windowed_operator", "triggers", "accumulations")
_LOCAL_MASTER = re.compile(r"^local(\[[^\]]*\])?$")
_ZIP_NAME = re.compile(r"^windowed_operator-[0-9a-f]{16}\.zip$")
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed entry times: the same sources give the same bytes


def is_local_master(master: Optional[str]) -> bool:
    """``local`` and ``local[...]``: executors are threads of the driver, whose interpreter imports the
    library already (``local-cluster[...]`` starts executor processes, so it is not local here)."""
    return master is not None and bool(_LOCAL_MASTER.match(master.strip()))


def _package_sources(packages: Iterable[str]) -> list[tuple[str, bytes]]:
    """(name inside the zip, content) of every ``.py`` file of the packages, sorted, without caches;
    read from their directories, or from the zip they were imported from (``spark-submit --py-files``)."""
    sources = []
    for name in packages:
        module = importlib.import_module(name)
        file = getattr(module, "__file__", None)
        if not file:
            raise RuntimeError(f"cannot locate package {name!r} (no __file__; a namespace package?)")
        root = Path(file).parent
        found = []
        if root.is_dir():
            for path in root.rglob("*.py"):
                relative = path.relative_to(root)
                if "__pycache__" not in relative.parts:
                    found.append(((Path(name) / relative).as_posix(), path.read_bytes()))
        elif archive := getattr(module.__loader__, "archive", None):  # zipimport
            inner = root.relative_to(archive).as_posix() + "/"
            with zipfile.ZipFile(archive) as opened:
                for entry in opened.namelist():
                    if entry.startswith(inner) and entry.endswith(".py") and "__pycache__/" not in entry:
                        found.append((f"{name}/{entry[len(inner):]}", opened.read(entry)))
        if not found:
            raise RuntimeError(f"found no .py files of package {name!r} under {root}")
        sources += found
    return sorted(sources)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "windowed-operator"


def library_zip(directory: Union[str, Path, None] = None, packages: Iterable[str] = PACKAGES) -> Path:
    """The zip of the packages, built once per content under ``directory`` (default: the user's cache
    directory, or the temporary directory if that cannot be written)."""
    contents = _package_sources(packages)
    digest = hashlib.sha256()
    for arcname, data in contents:
        digest.update(arcname.encode() + b"\0" + hashlib.sha256(data).digest())
    candidates = [Path(directory)] if directory is not None else [default_cache_dir(),
                                                                   Path(tempfile.gettempdir()) / "windowed-operator"]
    last_error: Optional[OSError] = None
    for folder in candidates:
        target = folder / f"windowed_operator-{digest.hexdigest()[:16]}.zip"
        if target.exists():
            return target
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, partial = tempfile.mkstemp(prefix=".partial-", suffix=".zip", dir=folder)
            with os.fdopen(fd, "wb") as handle, zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
                for arcname, data in contents:
                    archive.writestr(zipfile.ZipInfo(arcname, date_time=_ZIP_DATE), data,
                                     compress_type=zipfile.ZIP_DEFLATED)
            os.chmod(partial, 0o644)
            os.replace(partial, target)  # atomic: a concurrent run sees the whole zip or none
            return target
        except OSError as exc:
            last_error = exc
    raise RuntimeError(f"cannot write the library zip under {', '.join(map(str, candidates))}: {last_error}")


def shipping_conf(master: Optional[str] = None, py_files: Iterable[str] = (),
                  directory: Union[str, Path, None] = None) -> dict[str, str]:
    """Settings for a session not started yet: ``spark.submit.pyFiles`` with the library zip (unless the
    master is local) and ``py_files``.  Only read when the session's JVM starts, so a session that exists
    already needs :func:`ship_library` instead."""
    files = [] if is_local_master(master) else [str(library_zip(directory))]
    files += [str(Path(f).resolve()) for f in py_files]
    return {"spark.submit.pyFiles": ",".join(files)} if files else {}


def ship_library(spark: Any, directory: Union[str, Path, None] = None) -> Optional[Path]:
    """Add the library zip to a SparkSession's (or SparkContext's) Python path on every executor and
    return it; nothing when the master is local.  A context ships the library once: calling it again
    (even after the sources changed) returns the zip shipped before, as Python workers keep the modules
    they imported.  A Spark Connect session has no SparkContext: there the server's environment must
    provide the library (or ``spark.addArtifacts(zip, pyfile=True)``)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return None
    context = getattr(spark, "sparkContext", spark)
    if is_local_master(context.master):
        return None
    shipped = [name for name in getattr(context, "_python_includes", None) or () if _ZIP_NAME.match(name)]
    if shipped:
        from pyspark import SparkFiles

        return Path(SparkFiles.getRootDirectory()) / shipped[0]
    path = library_zip(directory)
    context.addPyFile(str(path))
    return path
