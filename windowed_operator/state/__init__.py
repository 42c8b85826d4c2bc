"""The state wing: how a key group's state is stored, chosen, moved and read back (internal).

- ``layouts``: the registry, one row per layout a checkpoint may hold, and the choice among them;
  ``STATE_VERSION`` and the versions read.
- ``transitions``: every live move between layouts, behind one entry (``move_in``) a runner calls
  per batch; ``legacy``: readers only earlier state versions need, each tagged with its versions.
- The stores: ``group_state`` (per-key records, with ``due_index`` and ``group_batch``),
  ``key_shards`` and ``row_shards`` (on the shared ``shards`` bookkeeping; ``row_columns_text``),
  ``part_log`` with ``pane_log`` and ``window_log`` (``record_columns``), and the record codecs
  ``codec`` (the object path's windows) and ``records`` (the columnar paths' rows).
"""
