"""A directory for the ``PYTHONPATH`` of the Python processes Spark starts, holding a site hook.

``local_session`` puts this directory on those processes' path (``spark.executorEnv.PYTHONPATH`` on
a local master), so that Python's ``site`` runs the ``sitecustomize`` here when each starts: it moves
Spark's ``pyspark.zip`` behind the installed pyspark (``pyspark_path``).  The process that needs it
most is one no daemon reaches: the driver-side pre-init Spark starts for each stateful operator at a
query's first batch (``python -m pyspark.sql.streaming.transform_with_state_driver_worker``).  No
other Python process sees this directory.  It is a package only so that it ships with the library.
"""
