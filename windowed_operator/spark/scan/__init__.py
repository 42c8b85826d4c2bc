"""The Spark runner's scan stage: what runs before the shuffle, on each partition's Arrow batches.

``fold`` (the ``ScanFold`` protocol; the driver builds and installs one: ``spark.driver.folds``) and the folds (``preaggregate``,
``prechain``, ``preselect``, ``prefold``), ``packing`` (a key group's rows as one packed row),
``heartbeat`` (every key group learns of every batch with input).
"""
