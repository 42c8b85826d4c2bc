"""The Spark runner's worker side: what runs in the executors' Python workers, per key group.

``processor`` (Spark's callbacks and the state layout, chosen once), ``groups`` (one runner per
engine), ``rows`` and ``fed`` (input rows, a chained stage's panes), ``timers``, the state store client
(``group_store``, ``pipelined_map``, ``state_schemas``), ``deferred`` (what Spark pickles: it imports
nothing heavy, and neither does this package), ``output_frame``, ``sliced`` (the sliced handoff).
"""
