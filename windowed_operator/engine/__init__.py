"""The engine wing: what computes panes from a key's elements and state (internal).

- ``build``: an operator's core (``build_core``), the one way from the model to the engine.
- The element engine: ``core`` (``WindowedCore``), ``firing`` (a firing into pane records),
  ``key_state`` (one key's state as plain data).
- The array engine: ``vectorized`` (one key's micro-batch as arrays), ``range_ops`` (array helpers).
- The columnar (table) engine: ``columnar`` (pane sharing, Beam's default trigger), ``columnar_triggers``
  and ``columnar_panes`` (early/late firings), ``columnar_windows``, ``columnar_sessions``,
  ``session_chains`` (a bundle's sessions as chains) and ``tables`` (the three tables, what each
  serves).
- ``pane_columns``: an upstream stage's panes read as columns.

The engine imports the model (``windows``, ``panes``, ``time_rules``, ...) and never the state, the
runners or Spark.
"""
