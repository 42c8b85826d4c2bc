"""The local runners: what drives an operator's core in-process (internal; ``op.run_local`` and
``op.local_runner`` reach them through ``windowed_operator.facade``).

- ``local``: ``LocalRunner``, one one-input operator.
- ``merge``: ``MergeRunner``, one two-input operator.
- ``chain``: ``ChainRunner``, operators one after another.
- ``totals``: what a run produced and the line both runners (local and Spark) print for it.
"""
