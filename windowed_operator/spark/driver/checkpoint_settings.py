"""The plan-shaping setting a query's checkpoints were started with (native stages), kept in each checkpoint.

A checkpoint holds the stateful operators its query started with, so a restart must plan the same
ones: ``spark.windowed_operator.nativeStages`` flipped under a running query is refused by Spark at
its first batch (``STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA``, see ``native_stage``).
So the library takes the setting from the checkpoint wherever it is told it before the query
starts: the pipeline runner names every sink's checkpoint before anything runs, and the Python API
is told it by ``apply(df, checkpoint=...)`` (``native_stages_for``).  A query whose checkpoints are
all new runs with native stages, and each checkpoint records the setting it started with in a file
of its own beside Spark's (``MARKER``); a restart takes the recorded setting.  A checkpoint Spark has
written without the setting recorded (started before this file existed, or by an ``apply`` not told
it) was planned with the session's setting then: the one the user gives now, else the default then,
off.  A setting the user gives (``--conf``, or the session's) wins on new checkpoints and is refused,
naming the checkpoint, where it disagrees with one that records another.  An ``apply`` not told the
checkpoint cannot see it, so there the setting is the session's, off by default.  Checkpoints on
other file systems (``s3a://``, ``hdfs://``, or a plain path where the cluster's default file system
is not the local one) are not read here: with one of them among a query's checkpoints, the setting
is the user's or off.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ..base.checkpoint_record import RECORD as MARKER
from ..base.checkpoint_record import CheckpointRecordError, has_batches, local_directory, read_record, update_record
from ..base.errors import SparkOperatorError
from ..base.settings import read_flag
from .native_stage import NATIVE_STAGES_CONF


class CheckpointSettingError(SparkOperatorError):
    """A setting given for a run disagrees with what a checkpoint was started with."""


@dataclass(frozen=True)
class CheckpointState:
    """What a checkpoint says of the setting: ``recorded``, the setting its record holds (None: none,
    or not readable here: ``local`` is None); ``started``: Spark has written a batch into it.  Only a
    started checkpoint's record binds (a record in a directory without batches is an ``apply`` whose
    query never ran); a started one without a record was planned with the session's setting then."""

    location: str
    local: Optional[Path]
    recorded: Optional[bool]
    started: bool = False

    @property
    def binding(self) -> Optional[bool]:
        """The setting a restart must plan with (None: none is known)."""
        return self.recorded if self.started else None


def local_path(location: str, plain_paths_local: bool = True) -> Optional[Path]:
    """The directory of a checkpoint on the local file system, else None (``checkpoint_record``)."""
    directory = local_directory(location, plain_paths_local)
    return Path(directory) if directory is not None else None


def read_state(location: str, plain_paths_local: bool = True) -> CheckpointState:
    path = local_path(location, plain_paths_local)
    if path is None:
        return CheckpointState(location, None, recorded=None)
    try:
        kept = read_record(location, plain_paths_local=plain_paths_local)
    except CheckpointRecordError as exc:
        raise CheckpointSettingError(f"{exc}; it records {NATIVE_STAGES_CONF} as true or false") from None
    value = kept.get(NATIVE_STAGES_CONF)
    if value is not None and not isinstance(value, bool):
        raise CheckpointSettingError(f"checkpoint {location}: {MARKER} records {NATIVE_STAGES_CONF}={value!r}, "
                                     "not true or false")
    return CheckpointState(location, path, recorded=value,
                           started=has_batches(location, plain_paths_local=plain_paths_local))


def native_stages_setting(locations: Sequence[str], given: Optional[bool], plain_paths_local: bool = True) -> bool:
    """The setting a run over these checkpoints plans with (``given``: the user's, if any): what the
    started ones record; else the one given; else off where one was started without a record (the
    default then) or cannot be read here, on where all are new."""
    states = [read_state(location, plain_paths_local) for location in locations]
    bound = [s for s in states if s.binding is not None]
    if given is not None:
        for state in bound:
            if state.binding != given:
                raise CheckpointSettingError(
                    f"{NATIVE_STAGES_CONF}={str(given).lower()} is given, but checkpoint {state.location} was "
                    f"started with {str(state.binding).lower()}: a checkpoint keeps the stateful operators "
                    f"it started with, so Spark would refuse the query at its first batch; drop the setting to "
                    f"resume this checkpoint, or give a new checkpoint directory")
        return given
    values = {s.binding for s in bound}
    if len(values) > 1:
        listed = ", ".join(f"{s.location} ({str(s.binding).lower()})" for s in bound)
        raise CheckpointSettingError(f"the pipeline's checkpoints were started with different {NATIVE_STAGES_CONF} "
                                     f"settings ({listed}); its operators are planned once for every sink: give "
                                     f"the sinks that disagree new checkpoint directories")
    if values:
        return bool(values.pop())
    return all(s.local is not None and not s.started for s in states)  # all new and readable here


def native_stages_for(spark: Any, checkpoint: Optional[str]) -> bool:
    """The setting a chained stage applied over ``spark``'s session plans with: told the query's
    ``checkpoint``, the one it records, else (a new checkpoint) the session's or on, then recorded;
    not told it, the session's, off by default."""
    given = session_setting(spark)
    if checkpoint is None:
        return bool(given)
    local = default_file_system_is_local(spark)
    setting = native_stages_setting([checkpoint], given, plain_paths_local=local)
    record([checkpoint], setting, plain_paths_local=local)
    return setting


def session_setting(spark: Any) -> Optional[bool]:
    """The setting the session gives (None: it gives none)."""
    return read_flag(spark.conf, NATIVE_STAGES_CONF) if spark.conf.get(NATIVE_STAGES_CONF, None) is not None else None


def default_file_system_is_local(spark: Any) -> bool:
    """Whether a plain checkpoint path is on this machine (Hadoop's ``fs.defaultFS``; a session whose
    Hadoop settings cannot be read here, Spark Connect's, is taken as not)."""
    try:
        default = spark.sparkContext._jsc.hadoopConfiguration().get("fs.defaultFS", "file:///")
    except Exception:  # noqa: BLE001 - no JVM context on this side
        return False
    return str(default).startswith("file:")


def record(locations: Sequence[str], native_stages: bool, plain_paths_local: bool = True) -> None:
    """Write the setting into each local checkpoint Spark has not started yet (a started one keeps
    what it records, or, recording nothing, what its session had then, which no one can tell here)."""
    for location in locations:
        state = read_state(location, plain_paths_local)
        if state.local is None or state.started or state.recorded == native_stages:
            continue
        update_record(location, {NATIVE_STAGES_CONF: native_stages}, plain_paths_local=plain_paths_local)
