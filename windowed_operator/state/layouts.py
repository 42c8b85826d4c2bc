"""The state layouts: one row per way a key group's state may be stored, and the one choice among them.

A checkpoint's fingerprint names the layout its state was written in (``"state layout"``); a restart
whose operator chooses another layout moves the group's state once (``transitions.move_in``), if the
new layout's row lists the stored one among the layouts it moves in from.  Everything about a layout
is read from its row: its stored name (never change one: checkpoints hold it), the store that reads
and writes it, the domain of its texts and the field of the group's record holding its bookkeeping,
the transitions into it with the function performing each (in ``transitions``), and the state
versions whose checkpoints may hold it.  The fingerprint's permission (``LAYOUT_MIGRATIONS``,
``VERSION_MIGRATIONS``), the inspector's names and the docs' compatibility promise
(docs/contributing/state-compatibility.md, tested against this table) derive from it.

Adding a layout is a row here, its store, and a transition in ``transitions`` for every layout a
restart may come from; a new state version is ``STATE_VERSION`` and its history line.

Pure data: imports nothing of the library (the fingerprint reads it, and every state module).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

#: 4: end-of-window timers are due at max_timestamp + 1 (Beam's rule); windows carry on_time_hold.
#: 5: every group's bookkeeping carries the fingerprint of the operator that wrote it.
#: 6: each key's state is a JSON record in a MapState (windows, or pane rows or session rows on
#:    the columnar paths), with a due index; nothing is pickled.  (Sessions under the default trigger
#:    moved from windows to session rows within version 6: their records are migrated as read.)
#: 7: records are lists by position (``group_state.record_text``, ``records``), not objects of
#:    named fields; version 6 records are read, and rewritten in the new form when their key is written.
#: 8: the window log's parts of a join or cogroup keep its inputs by column (``record_columns``);
#:    version 7's parts (every accumulator by value) are read beside them and folded as before.
#: 9: row shards' texts keep their number columns packed (little-endian bytes in base64,
#:    ``row_columns_text``); version 8's texts of lists are read, and written packed when their shard is.
#: 10: the pane log's buckets hold a window's length of panes, its texts the pane starts and key codes
#:    packed and each key once (``pane_log``), and the group's record each bucket's earliest pane;
#:    version 9's parts (one pane's rows, as lists) are read beside them, and written in the new form
#:    when their bucket is loaded.
STATE_VERSION = 10
#: The state versions whose checkpoints this release restarts (earlier ones are refused, naming the
#: version: before 6 the state was pickled, and reading it would run code).  Readers that only these
#: earlier versions need live in ``legacy``.
VERSIONS_READ: tuple[str, ...] = ("6", "7", "8", "9", "10")
#: State versions whose state a later version reads (stored -> current): version 7 reads version
#: 6's records and rewrites each in its own form when it writes the key; version 8 reads both, and
#: version 7's window-log parts beside its own; version 9 reads all three, and version 8's row shards;
#: version 10 reads all four, and version 9's pane-log parts.
VERSION_MIGRATIONS: set[tuple[str, str]] = {(old, new) for old in VERSIONS_READ for new in VERSIONS_READ
                                            if int(old) < int(new)}


@dataclass(frozen=True)
class Move:
    """A transition into a layout: from the layout ``source`` (as stored, without the key-shards
    suffix), performed by ``transitions.<act>`` once for the whole group (``by_key=False``), or by the
    records codec as each old record is read (``by_key=True``: ``act`` names the reader)."""
    source: str
    act: str
    by_key: bool = False


@dataclass(frozen=True)
class Layout:
    """One state layout, as a checkpoint names it."""
    name: str
    #: The class reading and writing it, module.Class in ``windowed_operator.state``: a
    #: ``group_batch.LayoutStore`` that ``stores.open_store`` opens (a stored-only layout's store
    #: reads it as the batch moves it out).
    store: str
    #: Which table's records it holds: ``panes``, ``sessions`` or ``windows`` (columnar), "" (the
    #: object and array paths' windows).
    records: str
    #: The part domain of its texts ("": a per-key layout, whose records are key entries or key shards').
    domain: str
    #: The group record's field holding its bookkeeping ("": none).
    meta_key: str
    moves_in: tuple[Move, ...]
    versions: tuple[str, ...]
    #: ``choose_layout`` may choose it (False: a checkpoint may hold it, a restart moves it out).
    chosen: bool = True

    @property
    def per_key(self) -> bool:
        """A record per key (kept in its own entry or in key shards: ``KEY_SHARDS``)."""
        return not self.domain

    def move_from(self, stored: str) -> Optional[Move]:
        """The transition from ``stored`` (without the key-shards suffix) into this layout, if any."""
        return next((move for move in self.moves_in if move.source == stored), None)


PER_KEY_WINDOWS = Layout(
    "per-key windows", "group_batch.PerKeyWindows", "", "", "", (), ("6", "7", "8", "9", "10"))
PER_KEY_PANE_ROWS = Layout(
    "per-key pane rows", "records.KeyRecords", "panes", "", "", (), ("6", "7", "8", "9", "10"))
PER_KEY_SESSION_ROWS = Layout(
    "per-key session rows", "records.KeyRecords", "sessions", "", "",
    (Move("per-key windows", "windows_as_rows", by_key=True),), ("6", "7", "8"), chosen=False)
PER_KEY_WINDOW_ROWS = Layout(
    "per-key window rows", "records.KeyRecords", "windows", "", "",
    (Move("per-key windows", "windows_as_rows", by_key=True),), ("6", "7", "8"), chosen=False)
PANE_LOG = Layout(
    "pane log", "pane_log.PaneLog", "panes", "panes", "pane_log",
    (Move("per-key pane rows", "key_records_to_pane_log"),), ("6", "7", "8", "9", "10"))
WINDOW_LOG = Layout(
    "window log", "window_log.WindowLog", "", "windows", "window_log",
    (Move("per-key windows", "key_windows_to_window_log"),), ("7", "8", "9", "10"))
SESSION_ROW_SHARDS = Layout(
    "session rows in row shards", "row_shards.RowShardStore", "sessions", "rows", "row_shards",
    (Move("per-key session rows", "key_records_to_row_shards"),
     Move("per-key windows", "key_records_to_row_shards")), ("7", "8", "9", "10"))
WINDOW_ROW_SHARDS = Layout(
    "window rows in row shards", "row_shards.RowShardStore", "windows", "rows", "row_shards",
    (Move("per-key window rows", "key_records_to_row_shards"),
     Move("per-key windows", "key_records_to_row_shards")), ("7", "8", "9", "10"))

#: Every layout a checkpoint may hold (a per-key one also in key shards).
LAYOUTS: tuple[Layout, ...] = (PER_KEY_WINDOWS, PER_KEY_PANE_ROWS, PER_KEY_SESSION_ROWS, PER_KEY_WINDOW_ROWS,
                               PANE_LOG, WINDOW_LOG, SESSION_ROW_SHARDS, WINDOW_ROW_SHARDS)
BY_NAME: dict[str, Layout] = {layout.name: layout for layout in LAYOUTS}
#: Row shards by the rows' table.
ROW_SHARDS: dict[str, Layout] = {layout.records: layout for layout in LAYOUTS
                                 if layout.domain == "rows"}


@dataclass(frozen=True)
class KeyShards:
    """A per-key layout's records kept many keys to a text (``key_shards``): the same records, so a
    group stored with a record per entry (before key shards, or with the removed
    ``spark.windowed_operator.keyShards=false``) moves in (``act``: ``GroupState`` moves them at its
    first commit); a library that predates shards refuses the suffixed name instead of finding no records."""
    suffix: str
    store: str
    domain: str
    meta_key: str
    act: str
    versions: tuple[str, ...]


KEY_SHARDS = KeyShards(" in key shards", "key_shards.KeyShards", "keys", "key_shards", "GroupState._move_records",
                       ("6", "7", "8", "9", "10"))
KEY_SHARDS_SUFFIX = KEY_SHARDS.suffix

#: State layouts whose records a later layout reads and rewrites (stored -> current).
LAYOUT_MIGRATIONS: set[tuple[str, str]] = {(move.source, layout.name) for layout in LAYOUTS
                                           for move in layout.moves_in}


def in_key_shards(layout: str) -> str:
    return layout + KEY_SHARDS_SUFFIX


def record_layout(layout: str) -> str:
    """A stored layout's name without the key-shards suffix (the records are the same)."""
    return layout[:-len(KEY_SHARDS_SUFFIX)] if layout.endswith(KEY_SHARDS_SUFFIX) else layout


@dataclass(frozen=True)
class Chosen:
    """The layout an operator's state is kept in, and whether its per-key records are in key shards
    (None: not a per-key layout, or records read as stored)."""
    layout: Layout
    key_shards: Optional[bool]

    @property
    def name(self) -> str:
        """The name the fingerprint stores."""
        return in_key_shards(self.layout.name) if self.key_shards else self.layout.name


def choose_layout(*, records: Optional[str], by_pane: bool, by_window: bool, event_time: bool) -> Chosen:
    """The layout of an operator's state.  ``records``: the columnar table serving it (``panes``,
    ``sessions``, ``windows``; None: the object or array path); ``by_pane``: the pane table may keep
    its rows by pane (``pane_log.supports_pane_log``: the default trigger, no allowed lateness);
    ``by_window``: the object path may keep its windows by window (``window_log.supports_window_log``,
    and no upstream stage); both logs need event time.  Session and window rows are kept in row
    shards; per-key records in key shards."""
    if records == "panes":
        layout = PANE_LOG if by_pane and event_time else PER_KEY_PANE_ROWS
    elif records:
        layout = ROW_SHARDS[records]
    else:
        layout = WINDOW_LOG if by_window and event_time else PER_KEY_WINDOWS
    return Chosen(layout, True if layout.per_key else None)
