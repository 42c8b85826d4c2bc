"""Where a Spark Python process imports pyspark from: the installed package, not Spark's zip.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and ``py4j-*-src.zip`` at the head of the path of
every Python process it starts (workers, their daemon, the driver-side pre-init of each stateful
operator).  A zip holds sources only and Python cannot cache their bytecode there, so each such
process compiles pyspark from source: 0.5-0.9 s of CPU per process (py-spy on Nexmark q11).  When
pyspark is pip-installed, SPARK_HOME is the installed package itself, so the zip is the same release
as the package beside it, whose bytecode is cached.

This module imports nothing but the standard library: the site hook (``worker_site``) loads it by
file path, before anything has imported pyspark and without importing this library's packages.
"""
from __future__ import annotations

import os
import re

_PY4J_ZIP = re.compile(r"py4j-(?P<version>[0-9][0-9A-Za-z.]*)-src\.zip")


def installed_pyspark_first(path: list[str]) -> list[str]:
    """``path`` with the zips of a pip-installed pyspark moved behind everything else.

    A zip is moved only when the installed package it ships in (for py4j: the same version's
    installed distribution) is on ``path`` too; it stays at the end as the fallback.
    """
    normalized = {os.path.normpath(entry) for entry in path}
    moved = [entry for entry in path if _installed_copy_on_path(entry, normalized)]
    return [entry for entry in path if entry not in moved] + moved


def _installed_copy_on_path(entry: str, normalized: set[str]) -> bool:
    name = os.path.basename(entry)
    py4j = _PY4J_ZIP.fullmatch(name)
    if name != "pyspark.zip" and py4j is None:
        return False
    lib = os.path.dirname(os.path.normpath(entry))
    package = os.path.dirname(os.path.dirname(lib))  # <site>/pyspark/python/lib -> <site>/pyspark
    site = os.path.dirname(package)
    if os.path.basename(package) != "pyspark" or site not in normalized \
            or not os.path.isfile(os.path.join(package, "__init__.py")):
        return False
    if py4j is None:
        return True
    return os.path.isfile(os.path.join(site, "py4j", "__init__.py")) and \
        os.path.isdir(os.path.join(site, f"py4j-{py4j['version']}.dist-info"))


__all__ = ["installed_pyspark_first"]
