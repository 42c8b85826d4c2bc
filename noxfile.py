"""The fast tests (no Spark, no JVM) on every Python version the package declares (``requires-python``
in ``pyproject.toml``): ``pip install nox && nox`` runs each version installed on the machine (a
missing one is skipped), ``nox -s fast-3.10`` one.  Outside CI's time: CI runs the whole suite on
one version."""
import nox

nox.options.error_on_missing_interpreters = False
nox.options.reuse_existing_virtualenvs = True

VERSIONS = ["3.10", "3.11", "3.12", "3.13"]


@nox.session(python=VERSIONS)
def fast(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", "-m", "not spark", "-p", "no:cacheprovider", *session.posargs)
