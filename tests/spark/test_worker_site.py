"""Every Python process Spark starts for a local session imports pyspark from the installed package:
the driver-side pre-init of a stateful operator too, which no daemon reaches (``worker_site``)."""
import os
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.spark


def _child(tmp_path, python_path, code):
    """What ``code`` prints in a new Python whose PYTHONPATH is ``python_path``, as Spark starts it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(python_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


def _spark_zips():
    import pyspark

    lib = os.path.join(os.path.dirname(pyspark.__file__), "python", "lib")
    return [os.path.join(lib, name) for name in sorted(os.listdir(lib)) if name.endswith(".zip")]


def test_a_process_with_the_hook_imports_the_installed_pyspark(tmp_path):
    import pyspark

    from windowed_operator.spark.base.session import WORKER_SITE

    zips = _spark_zips()
    assert any(os.path.basename(z) == "pyspark.zip" for z in zips)
    code = "import pyspark; print(pyspark.__file__)"
    assert ".zip" in _child(tmp_path, zips, code)  # Spark's order alone: the zip wins
    assert _child(tmp_path, [*zips, WORKER_SITE], code) == pyspark.__file__


def test_the_hook_runs_the_sitecustomize_it_shadows(tmp_path):
    from windowed_operator.spark.base.session import WORKER_SITE

    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE_RAN = True\n")
    code = "import builtins; print(getattr(builtins, 'OTHER_SITE_RAN', False))"
    assert _child(tmp_path, [WORKER_SITE, str(other)], code) == "True"
    assert _child(tmp_path, [WORKER_SITE], code) == "False"


def test_a_link_to_the_hook_on_the_path_does_not_run_it_again(tmp_path):
    from windowed_operator.spark.base.session import WORKER_SITE

    link = tmp_path / "link"
    link.symlink_to(WORKER_SITE, target_is_directory=True)
    code = "import sitecustomize; print(sitecustomize.__file__)"
    assert _child(tmp_path, [WORKER_SITE, str(link)], code) == os.path.join(WORKER_SITE, "sitecustomize.py")
    assert _child(tmp_path, [str(link), WORKER_SITE], code) == str(link / "sitecustomize.py")


def test_a_local_session_puts_the_hook_on_its_workers_path_and_a_cluster_session_does_not():
    from windowed_operator.spark.base.session import WORKER_SITE, session_conf

    assert session_conf("local[2]")["spark.executorEnv.PYTHONPATH"] == WORKER_SITE
    assert "spark.executorEnv.PYTHONPATH" not in session_conf("spark://host:7077")


def test_a_workers_path_of_the_callers_own_keeps_the_hook_after_it():
    from windowed_operator.spark.base.session import WORKER_SITE, session_conf

    theirs = os.pathsep.join(["/opt/udfs", "/opt/more"])
    given = {"spark.executorEnv.PYTHONPATH": theirs}
    assert session_conf("local[2]", extra_conf=given)["spark.executorEnv.PYTHONPATH"] == \
        os.pathsep.join([theirs, WORKER_SITE])
    assert session_conf("spark://host:7077", extra_conf=given)["spark.executorEnv.PYTHONPATH"] == theirs


def test_the_stateful_pre_init_imports_the_installed_pyspark(spark, tmp_path):
    """The pre-init is ``python -m pyspark.sql.streaming.transform_with_state_driver_worker``, started
    by the driver JVM at a query's first batch; it compiled pyspark from the zip (0.7-0.85 s)."""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor

    records = tmp_path / "records"
    records.mkdir()

    class RecordsWherePysparkCameFrom(StatefulProcessor):
        def init(self, handle):
            import pyspark

            (records / f"{os.getpid()}-{time.monotonic_ns()}").write_text(f"{sys.argv[0]}\n{pyspark.__file__}")
            self.seen = handle.getValueState("seen", "n bigint")

        def handleInputRows(self, key, rows, timerValues):
            yield pd.DataFrame({"k": [key[0]], "n": [sum(len(r) for r in rows)]})

        def close(self):
            pass

    source = tmp_path / "in"
    spark.range(4).selectExpr("id % 2 as k").write.parquet(str(source))
    stream = spark.readStream.schema("k long").parquet(str(source))
    query = (stream.groupBy("k").transformWithStateInPandas(RecordsWherePysparkCameFrom(), "k long, n long",
                                                            "append", "None")
             .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None
    import pyspark

    seen = [f.read_text().split("\n") for f in records.iterdir()]
    pre_inits = [where for program, where in seen if program.endswith("transform_with_state_driver_worker.py")]
    assert pre_inits, seen
    assert {where for _, where in seen} == {pyspark.__file__}
