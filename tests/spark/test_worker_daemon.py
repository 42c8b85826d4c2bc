"""A local session's Python workers start with the processor's modules imported (``worker_daemon``)."""
import pytest

pytestmark = pytest.mark.spark


def test_workers_are_forked_with_the_processor_imported(spark):
    def _imported_already(rows):  # (nested: pickled by value, the workers cannot import the tests)
        import os
        import sys

        import pandas as pd

        from windowed_operator.spark import worker_daemon

        for _ in rows:
            pass
        yield pd.DataFrame({"had": ["windowed_operator.spark.worker.processor" in sys.modules
                                    and worker_daemon.PRELOADED_BY == os.getppid()]})

    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == "windowed_operator.spark.worker_daemon"
    rows = spark.range(4, numPartitions=4).mapInPandas(_imported_already, "had boolean").collect()
    assert [r.had for r in rows] == [True] * 4


def test_a_cluster_session_keeps_the_stock_daemon():
    from windowed_operator.spark.base.session import session_conf

    assert "spark.python.daemon.module" not in session_conf("spark://host:7077")
    assert session_conf("local[2]")["spark.python.daemon.module"] == "windowed_operator.spark.worker_daemon"


def test_workers_import_pyspark_from_the_installed_package_not_its_zip(spark):
    """Spark puts ``pyspark.zip`` first on a worker's path; compiled from source in every new process
    (no bytecode cache in a zip), it cost each daemon 0.3-0.5 s of its start-up."""
    def _pyspark_file(rows):
        import pandas as pd
        import pyspark

        for _ in rows:
            pass
        yield pd.DataFrame({"file": [pyspark.__file__]})

    import pyspark

    rows = spark.range(2, numPartitions=2).mapInPandas(_pyspark_file, "file string").collect()
    assert {r.file for r in rows} == {pyspark.__file__}
    assert ".zip" not in pyspark.__file__


def _installed_pyspark(site, py4j_version="0.10.9.9", dist_info=True):
    """A site-packages directory shaped like pip's install of pyspark (its zips inside the package)."""
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    (site / "py4j").mkdir()
    (site / "py4j" / "__init__.py").write_text("")
    if dist_info:
        (site / f"py4j-{py4j_version}.dist-info").mkdir()
    return str(lib / "pyspark.zip"), str(lib / f"py4j-{py4j_version}-src.zip")


def test_the_zips_of_an_installed_pyspark_move_behind_the_package(tmp_path):
    from windowed_operator.spark.base.pyspark_path import installed_pyspark_first

    site = tmp_path / "site-packages"
    pyspark_zip, py4j_zip = _installed_pyspark(site)
    path = ["/work", pyspark_zip, py4j_zip, "/usr/lib/python3.11", str(site)]
    assert installed_pyspark_first(path) == ["/work", "/usr/lib/python3.11", str(site), pyspark_zip, py4j_zip]


def test_zips_without_their_installed_copy_on_the_path_stay_first(tmp_path):
    from windowed_operator.spark.base.pyspark_path import installed_pyspark_first

    site = tmp_path / "site-packages"
    pyspark_zip, py4j_zip = _installed_pyspark(site)
    # the package's directory is not on the path (SPARK_HOME of another environment): nothing moves
    assert installed_pyspark_first([pyspark_zip, py4j_zip, "/other"]) == [pyspark_zip, py4j_zip, "/other"]
    # a Spark distribution (SPARK_HOME/python/lib, no package beside it) keeps its zips first
    spark_home = tmp_path / "spark-3" / "python" / "lib"
    spark_home.mkdir(parents=True)
    path = [str(spark_home / "pyspark.zip"), str(tmp_path)]
    assert installed_pyspark_first(path) == path


def test_a_py4j_zip_moves_only_when_that_version_is_installed(tmp_path):
    from windowed_operator.spark.base.pyspark_path import installed_pyspark_first

    site = tmp_path / "site-packages"
    pyspark_zip, py4j_zip = _installed_pyspark(site, dist_info=False)
    assert installed_pyspark_first([pyspark_zip, py4j_zip, str(site)]) == [py4j_zip, str(site), pyspark_zip]
