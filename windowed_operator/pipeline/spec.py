"""A pipeline as data: sources, operators chained by name, sinks — validated pydantic models.

Everything is named with its parameters (``{"sum": {"field": "amount"}}``, ``{"sessions": {"gap":
"30s"}}``); durations take units (``"10s"``).  User code is only ever referred to by an importable
dotted path (``package.module:function``), and only when whoever *runs* the pipeline allows it
(``CodePolicy``: the CLI's ``--allow-code`` or ``--allow-module``), never because the file says so:
a file cannot grant itself the right to run code.  Loading a pipeline never evaluates code from
the file itself.
"""
from __future__ import annotations

import copy
import importlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional, Union

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, create_model, field_validator,
                      model_validator)

from accumulations import (AllMax, ApproxCountDistinct, ApproxPercentile, Cogroup, Count, CountDistinct, FullOuterJoin,
                           InnerJoin, LeftOuterJoin, Max, Mean, Min, Quantiles, Sum, ToList, TopN)
from accumulations.base import Accumulation
from accumulations.merge import MergeAccumulation
from triggers.option import TriggerOption

from ..config import Duration, _duration
from ..ddl import parse_columns
from ..merge_operator import InputOptions, KeyedWindowedMergeOperator, MergeOperatorBase, WindowedMergeOperator
from ..operator import KeyedWindowedOperator, OnBadElement, WindowedOperator, WindowingOptions
from ..panes import OUTPUT_COLUMNS, SIDE_OUTPUT_COLUMNS
from ..watermarks import BoundedDisorderWatermark, FixedLagWatermark, UpstreamWatermark, needs_processing_time
from ..windows import CumulativeWindows, GlobalWindow, SessionWindows, SlidingWindows, TimeWindows
from ..windows.base import WindowOption


#: The columns of an operator's panes without ``key`` (``panes.OUTPUT_COLUMNS``), and ``index``: the
#: local runner's name of ``pane_index``, beside it.
_AFTER_PANE_INDEX = OUTPUT_COLUMNS.index("pane_index") + 1
PANE_COLUMNS = (*OUTPUT_COLUMNS[1:_AFTER_PANE_INDEX], "index", *OUTPUT_COLUMNS[_AFTER_PANE_INDEX:])
#: The columns of Spark's rate source.
RATE_COLUMNS = ["timestamp", "value"]


class Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _exactly_one(model: BaseModel, what: str) -> None:
    chosen = [name for name in type(model).model_fields if getattr(model, name) is not None]
    if len(chosen) != 1:
        options = ", ".join(type(model).model_fields)
        raise ValueError(f"give exactly one {what} ({options}); got {', '.join(chosen) or 'none'}")


def import_dotted(path: str) -> Any:
    """``package.module:attribute`` (or ``package.module.attribute``)."""
    module_name, _, attribute = path.partition(":") if ":" in path else path.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"{path!r} is not a dotted path such as 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module {module_name!r} of {path!r}: {exc}") from None
    if not hasattr(module, attribute):
        raise ValueError(f"module {module_name!r} has no attribute {attribute!r}")
    return getattr(module, attribute)


@dataclass(frozen=True)
class CodePolicy:
    """Which user code a pipeline may import: none (the default), any (``--allow-code``), or the
    modules named (``--allow-module pkg.mod``, which also allows its submodules)."""

    allow_all: bool = False
    modules: tuple[str, ...] = ()

    def permits(self, dotted: str) -> bool:
        if self.allow_all:
            return True
        module = dotted.partition(":")[0] if ":" in dotted else dotted.rpartition(".")[0]
        return any(module == allowed or module.startswith(allowed + ".") for allowed in self.modules)

    def refusal(self, dotted: str, what: str) -> str:
        module = dotted.partition(":")[0] if ":" in dotted else dotted.rpartition(".")[0]
        return (f"{what} {dotted!r}; user code runs only when the command allows it: pass --allow-code, or "
                f"--allow-module {module or dotted} (load_pipeline(..., code=CodePolicy(...)) from Python)")


# -- windows ------------------------------------------------------------------------------------------
class Tumbling(Spec):
    size: Duration = Field(gt=0)
    offset: Duration = 0


class Hopping(Spec):
    size: Duration = Field(gt=0)
    slide: Duration = Field(gt=0)
    offset: Duration = 0


class Sessions(Spec):
    """``gap``: one gap for every element (``10s``); ``gap_field``: the column holding each element's
    gap (milliseconds, an interval, or a text such as ``10s``)."""

    gap: Optional[Duration] = Field(default=None, gt=0)
    gap_field: Optional[str] = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> "Sessions":
        _exactly_one(self, "session gap")
        return self


class Sliding(Spec):
    size: Duration = Field(ge=0)


class Cumulative(Spec):
    max_size: Duration = Field(gt=0)
    step: Duration = Field(gt=0)
    offset: Duration = 0


class Empty(Spec):
    pass


class WindowSpec(Spec):
    """One of: ``tumbling``, ``hopping``, ``sessions``, ``sliding`` (per record), ``cumulative``, ``global``."""

    tumbling: Optional[Tumbling] = None
    hopping: Optional[Hopping] = None
    sessions: Optional[Sessions] = None
    sliding: Optional[Sliding] = None
    cumulative: Optional[Cumulative] = None
    global_: Optional[Empty] = Field(default=None, alias="global")

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _one(self) -> "WindowSpec":
        _exactly_one(self, "window")
        return self

    def build(self) -> WindowOption:
        if self.tumbling:
            return TimeWindows(self.tumbling.size, self.tumbling.offset)
        if self.hopping:
            return TimeWindows(self.hopping.size, self.hopping.offset).slide_by(self.hopping.slide)
        if self.sessions:
            if self.sessions.gap_field is not None:
                return SessionWindows(gap=self.sessions.gap_field)
            return SessionWindows(self.sessions.gap)
        if self.sliding:
            return SlidingWindows(self.sliding.size)
        if self.cumulative:
            return CumulativeWindows(self.cumulative.max_size, self.cumulative.step, offset=self.cumulative.offset)
        return GlobalWindow()


# -- accumulations ------------------------------------------------------------------------------------
#: A pipeline file's name for each accumulation and the class it builds.  A file gives the class's
#: own parameters by name (``{"top_n": {"n": 3, "field": "amount"}}``), validated by the class itself;
#: what a file cannot hold is left out (a callable ranking key), and a join's function is a dotted
#: path to import (``join: package.module:function``, allowed only by the command: ``CodePolicy``).
ACCUMULATIONS: dict[str, type] = {
    "sum": Sum, "count": Count, "min": Min, "max": Max, "mean": Mean, "to_list": ToList, "top_n": TopN,
    "all_max": AllMax, "count_distinct": CountDistinct, "approx_count_distinct": ApproxCountDistinct, "quantiles": Quantiles,
    "approx_percentile": ApproxPercentile, "inner_join": InnerJoin, "left_outer_join": LeftOuterJoin,
    "full_outer_join": FullOuterJoin, "cogroup": Cogroup,
}
#: A parameter a file names by a dotted path of user code (the class takes the imported object).
_CODE_PARAMETERS = ("join",)


def _file_parameters(cls: type) -> dict[str, Any]:
    """The parameters of ``cls`` a pipeline file gives: its fields (with their constraints and
    defaults) but those that take a callable, which a file cannot hold, and those of user code, as
    dotted paths."""
    fields: dict[str, Any] = {}
    for name, info in cls.model_fields.items():  # type: ignore[attr-defined]
        if name in _CODE_PARAMETERS:
            fields[name] = (Optional[str], Field(default=None, description=f"dotted path of {name}(left, right); "
                                                                          "needs --allow-code or --allow-module"))
        elif "Callable" not in str(info.annotation):
            fields[name] = (info.annotation, copy.copy(info))
    return fields


class CodeArgs(Spec):
    path: str = Field(description="dotted path of an Accumulation or MergeAccumulation class")
    args: dict[str, Any] = Field(default_factory=dict)


#: Each accumulation's arguments in a file, derived from its class (``_file_parameters``).
ACCUMULATION_ARGS: dict[str, type[Spec]] = {
    name: create_model(f"{cls.__name__}Args", __base__=Spec, **_file_parameters(cls))
    for name, cls in ACCUMULATIONS.items()}


class _AccumulationChoice(Spec):
    """One of ``ACCUMULATIONS`` by name with the class's parameters, or ``code``: a class of user code
    (the fields are made from the table: ``AccumulationSpec``)."""

    if TYPE_CHECKING:
        code: Optional[CodeArgs]

    @model_validator(mode="after")
    def _one(self) -> "_AccumulationChoice":
        _exactly_one(self, "accumulation")
        return self

    def chosen(self) -> tuple[str, Any]:
        """The name given and its arguments."""
        name = next(n for n in type(self).model_fields if getattr(self, n) is not None)
        return name, getattr(self, name)

    @property
    def is_merge(self) -> bool:
        name, _ = self.chosen()
        return name != "code" and issubclass(ACCUMULATIONS[name], MergeAccumulation)

    def field(self) -> Optional[str]:
        """The field a one-input accumulation reads from each element (None: the whole element)."""
        return getattr(self.chosen()[1], "field", None)

    def code_paths(self) -> list[str]:
        """The dotted paths of user code this accumulation imports."""
        name, args = self.chosen()
        if name == "code":
            return [args.path]
        return [path for path in (getattr(args, p, None) for p in _CODE_PARAMETERS) if path is not None]

    def build(self) -> Union[Accumulation, MergeAccumulation]:
        name, args = self.chosen()
        if name == "code":
            target = import_dotted(args.path)
            if not (isinstance(target, type) and issubclass(target, (Accumulation, MergeAccumulation))):
                raise ValueError(f"{args.path!r} is not an Accumulation or MergeAccumulation class")
            return target(**args.args)
        given = args.model_dump(exclude_unset=True)
        for parameter in _CODE_PARAMETERS:
            if given.get(parameter) is not None:
                given[parameter] = import_dotted(given[parameter])
        built: Union[Accumulation, MergeAccumulation] = ACCUMULATIONS[name](**given)
        return built


if TYPE_CHECKING:  # (a model made at import: a type checker sees its base)
    AccumulationSpec = _AccumulationChoice
else:
    AccumulationSpec = create_model(
        "AccumulationSpec", __base__=_AccumulationChoice,
        **{name: (Optional[model], None) for name, model in ACCUMULATION_ARGS.items()},
        code=(Optional[CodeArgs], None))


# -- watermark ----------------------------------------------------------------------------------------
class WatermarkSpec(Spec):
    """One of: ``upstream`` (the source's watermark: give ``delay``), ``bounded_disorder``, ``fixed_lag``."""

    upstream: Optional[Duration] = Field(default=None, ge=0, description="withWatermark delay on the source")
    bounded_disorder: Optional[Duration] = Field(default=None, ge=0)
    fixed_lag: Optional[Duration] = Field(default=None, ge=0)
    idle_timeout: Optional[Duration] = Field(
        default=None, gt=0, description="with upstream or bounded_disorder: processing time without input after "
                                        "which the watermark advances with processing time")
    partition: Optional[str] = Field(
        default=None, min_length=1, description="with bounded_disorder: the column naming each row's input partition; "
                                                "the watermark is the minimum over partitions not idle")

    @model_validator(mode="after")
    def _one(self) -> "WatermarkSpec":
        kinds = [name for name in ("upstream", "bounded_disorder", "fixed_lag") if getattr(self, name) is not None]
        if len(kinds) != 1:
            raise ValueError(f"give exactly one watermark (upstream, bounded_disorder, fixed_lag); got "
                             f"{', '.join(kinds) or 'none'}")
        if self.idle_timeout is not None and self.fixed_lag is not None:
            raise ValueError("idle_timeout applies to event-time watermarks (upstream, bounded_disorder): a fixed_lag "
                             "watermark already follows processing time")
        if self.partition is not None and self.bounded_disorder is None:
            raise ValueError(f"partition ({self.partition!r}) applies to a bounded_disorder watermark, which the operator "
                             "computes from each partition's event times: give bounded_disorder: <delay>")
        return self

    def build(self) -> Union[UpstreamWatermark, BoundedDisorderWatermark, FixedLagWatermark]:
        if self.bounded_disorder is not None:
            return BoundedDisorderWatermark(max_disorder=self.bounded_disorder, idle_timeout=self.idle_timeout,
                                            partition=self.partition)
        if self.fixed_lag is not None:
            return FixedLagWatermark(lag=self.fixed_lag)
        return UpstreamWatermark(idle_timeout=self.idle_timeout)


_END_OF_INPUT = ("a boolean column: a row where it is true is not data but ends the input (every window closes); "
                 "without it the input never ends")


# -- sources ------------------------------------------------------------------------------------------
def _valid_schema(text: str) -> str:
    parse_columns(text)  # raises naming the column and the type
    return text


class FileSource(Spec):
    path: str
    format: Literal["json", "csv", "parquet"]
    schema_: str = Field(alias="schema", description="DDL, e.g. 'user string, amount bigint, ts timestamp'")
    max_files_per_trigger: Optional[int] = Field(default=None, gt=0)
    options: dict[str, str] = Field(default_factory=dict)
    end_of_input: Optional[str] = Field(default=None, description=_END_OF_INPUT)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @field_validator("schema_")
    @classmethod
    def _schema(cls, text: str) -> str:
        return _valid_schema(text)


class RateSource(Spec):
    rows_per_second: int = Field(default=100, gt=0)


class MemorySource(Spec):
    schema_: str = Field(alias="schema")
    rows: list[dict[str, Any]] = Field(min_length=1)
    rows_per_batch: int = Field(default=1_000, gt=0)
    end_of_input: Optional[str] = Field(default=None, description=_END_OF_INPUT)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @field_validator("schema_")
    @classmethod
    def _schema(cls, text: str) -> str:
        return _valid_schema(text)


class SourceSpec(Spec):
    files: Optional[FileSource] = None
    rate: Optional[RateSource] = None
    memory: Optional[MemorySource] = None

    @property
    def columns(self) -> Optional[list[str]]:
        """The columns the source declares (None: a rate source's fixed ones are not checked)."""
        kind = self.files or self.memory
        return [name for name, _ in parse_columns(kind.schema_)] if kind is not None else None

    @property
    def end_of_input(self) -> Optional[str]:
        """The source's end-of-input marker column, if it has one."""
        kind = self.files or self.memory
        return kind.end_of_input if kind is not None else None

    @model_validator(mode="after")
    def _one(self) -> "SourceSpec":
        _exactly_one(self, "source kind")
        return self


# -- operators ----------------------------------------------------------------------------------------
#: A column, or a record of columns (``{auction: key, num: value}``: output field -> column read).
ValueSpec = Optional[Union[str, dict[str, str]]]


def _option(cls: type, name: str) -> Any:
    """The field ``name`` of the public option class ``cls`` as a pipeline file takes it: with the
    class's own constraints, default and description (a copy, which the file's model owns)."""
    return copy.copy(cls.model_fields[name])  # type: ignore[attr-defined]


class InputSpec(Spec):
    key: Optional[str] = None
    timestamp: Optional[str] = None
    value: ValueSpec = None


class OperatorSpec(Spec):
    """A one-input operator (``input``) or a merge operator (``left`` and ``right``)."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")
    input: Optional[str] = None
    left: Optional[str] = None
    right: Optional[str] = None
    key: Optional[str] = None
    timestamp: Optional[str] = None
    value: ValueSpec = None
    left_options: InputSpec = Field(default_factory=InputSpec)
    right_options: InputSpec = Field(default_factory=InputSpec)
    window: Optional[WindowSpec] = None
    accumulation: AccumulationSpec
    trigger: TriggerOption = Field(default_factory=TriggerOption)
    allowed_lateness: int = _option(WindowingOptions, "allowed_lateness")
    watermark: Optional[WatermarkSpec] = Field(
        default=None, description="default: bounded_disorder 0 over a source; an operator reading another operator's "
                                  "panes follows that operator's watermark and takes none of its own")
    late_data_output: bool = _option(WindowingOptions, "late_data_output")
    on_bad_element: OnBadElement = _option(WindowingOptions, "on_bad_element")
    max_future_skew: Optional[Duration] = _option(WindowingOptions, "max_future_skew")
    idle_timeout: Optional[Duration] = _option(MergeOperatorBase, "idle_timeout")  # (merge operators only)

    @model_validator(mode="after")
    def _inputs(self) -> "OperatorSpec":
        merge = self.left is not None or self.right is not None
        if merge and (self.left is None or self.right is None):
            raise ValueError("a merge operator needs both left and right")
        if merge and self.input is not None:
            raise ValueError("give input (one-input operator) or left and right (merge operator), not both")
        if not merge and self.input is None:
            raise ValueError("give input (one-input operator) or left and right (merge operator)")
        if self.idle_timeout is not None and not merge:
            raise ValueError("idle_timeout is a merge operator's (an input quiet that long stops holding the "
                             "watermark back); for a quiet stream give the watermark one: watermark: "
                             "{bounded_disorder: 10s, idle_timeout: 1m}")
        if merge != self.accumulation.is_merge:
            merges = ", ".join(n for n, c in ACCUMULATIONS.items() if issubclass(c, MergeAccumulation))
            kind = f"a merge accumulation ({merges})"
            raise ValueError(f"accumulation: a {'merge' if merge else 'one-input'} operator needs "
                             f"{kind if merge else 'a one-input accumulation'}")
        return self

    @property
    def inputs(self) -> list[str]:
        return [self.input] if self.input is not None else [self.left, self.right]  # type: ignore[list-item]

    def output_columns(self) -> list[str]:
        """The columns of the operator's panes (on Spark; ``index`` is the local runner's name of
        ``pane_index``), with the late-data/dead-letter columns when it has that output."""
        keyed = self.key is not None or self.left_options.key is not None
        columns = (["key"] if keyed else []) + list(PANE_COLUMNS)
        if self.late_data_output or self.on_bad_element == "dead_letter":
            columns += list(SIDE_OUTPUT_COLUMNS)
        return columns

    @property
    def upstream_delay(self) -> Optional[int]:
        """The withWatermark delay put on the source(s) (``watermark: {upstream: ...}``), if any."""
        return self.watermark.upstream if self.watermark is not None else None

    def build(self, fed: bool = False) -> Any:
        """The operator; ``fed``: its input is another operator's panes, whose watermark it follows."""
        if self.watermark is not None:
            watermark = self.watermark.build()
        else:
            watermark = UpstreamWatermark() if fed else BoundedDisorderWatermark(max_disorder=0)
        common: dict[str, Any] = dict(
            window=self.window.build() if self.window else None, accumulation=self.accumulation.build(),
            trigger=self.trigger, allowed_lateness=self.allowed_lateness, watermark=watermark,
            timestamp=self.timestamp, value=self.value, late_data_output=self.late_data_output,
            on_bad_element=self.on_bad_element, max_future_skew=self.max_future_skew, name=self.name)
        keyed = self.key is not None or self.left_options.key is not None
        key: dict[str, Any] = {"key": self.key} if keyed else {}
        if self.input is not None:
            cls = KeyedWindowedOperator if keyed else WindowedOperator
            return cls(**common, **key)
        sides: dict[str, Any] = {"left": InputOptions(**self.left_options.model_dump()),
                                 "right": InputOptions(**self.right_options.model_dump())}
        merge_cls = KeyedWindowedMergeOperator if keyed else WindowedMergeOperator
        return merge_cls(**common, **sides, idle_timeout=self.idle_timeout, **key)


# -- sinks --------------------------------------------------------------------------------------------
class ConsoleSink(Spec):
    truncate: bool = False
    num_rows: int = Field(default=20, gt=0)


class FileSink(Spec):
    path: str
    format: Literal["json", "parquet"] = "parquet"


class MemorySink(Spec):
    query_name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


class ForeachBatchSink(Spec):
    function: str = Field(description="dotted path of f(batch_df, batch_id); needs --allow-code or --allow-module")


#: Database URL schemes a table sink takes (SQLAlchemy's names: a driver may follow ``+``).
TABLE_URL_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg")
_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class TableSinkSpec(Spec):
    """A SQL table kept equal to the operator's current result (``windowed_operator.sinks.TableSink``).

    ``url``: ``sqlite:///results.db`` (a path relative to the pipeline file) or
    ``postgresql://host:5432/db`` with no password in it: PostgreSQL takes the user and password from
    the environment (``PGUSER``, ``PGPASSWORD`` or a ``PGPASSFILE``); or ``url_env``: the name of an
    environment variable holding the whole URL.  Credentials never come from the file."""

    url: Optional[str] = None
    url_env: Optional[str] = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    table: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    mode: Literal["upsert", "add"] = "upsert"
    columns: list[Literal["timing", "pane_index", "is_last", "batch_id"]] = Field(default_factory=list)
    final_only: bool = False
    value_type: Optional[str] = None
    name: Optional[str] = Field(default=None, description="the sink's name in the progress table (default: table)")

    @field_validator("url")
    @classmethod
    def _url(cls, url: Optional[str]) -> Optional[str]:
        if url is None:
            return url
        match = _URL_SCHEME.match(url)
        scheme = match.group(1).lower() if match else None
        if scheme not in TABLE_URL_SCHEMES:
            raise ValueError(f"url {url!r}: the scheme must be one of {', '.join(TABLE_URL_SCHEMES)} "
                             "(e.g. sqlite:///results.db, postgresql://host:5432/db)")
        netloc = url[match.end():].split("/", 1)[0]  # type: ignore[union-attr]
        if "@" in netloc and ":" in netloc.rsplit("@", 1)[0]:
            raise ValueError("url holds a password: credentials come from the environment, never from the file "
                             "(PGPASSWORD or a PGPASSFILE for PostgreSQL, or url_env: NAME naming a variable that "
                             "holds the whole URL)")
        if "?" in url and "password" in url.split("?", 1)[1].lower():
            raise ValueError("url holds a password parameter: credentials come from the environment, never from "
                             "the file (PGPASSWORD, a PGPASSFILE, or url_env)")
        return url

    @field_validator("value_type")
    @classmethod
    def _value_type(cls, value_type: Optional[str]) -> Optional[str]:
        if value_type is not None:
            parse_columns(f"value {value_type}")
        return value_type

    @model_validator(mode="after")
    def _where(self) -> "TableSinkSpec":
        if (self.url is None) == (self.url_env is None):
            raise ValueError("give url (no password in it) or url_env (a variable holding the URL), one of them")
        if self.mode == "add" and self.final_only:
            raise ValueError("final_only keeps only final panes, but in mode add every pane holds part of the "
                             "window's value")
        return self

    def resolved_url(self) -> str:
        """The URL, read from the environment for ``url_env``."""
        import os

        if self.url is not None:
            return self.url
        value = os.environ.get(self.url_env or "")
        if not value:
            raise ValueError(f"table sink {self.table!r}: environment variable {self.url_env} (url_env) is not set")
        return value

    def build(self, operator: Any = None, query_id: Optional[str] = None) -> Any:
        """The sink (``query_id``: the batches' query, default a Spark batch's own)."""
        from ..sinks import TableSink

        return TableSink(self.resolved_url(), self.table, mode=self.mode, columns=self.columns,
                         final_only=self.final_only, value_type=self.value_type, name=self.name, operator=operator,
                         query_id=query_id)


#: What of an operator's output a sink receives (``windowed_operator.spark.outputs``).
SinkOutput = Literal["all", "panes", "side"]


class SinkSpec(Spec):
    input: str
    console: Optional[ConsoleSink] = None
    files: Optional[FileSink] = None
    memory: Optional[MemorySink] = None
    foreach_batch: Optional[ForeachBatchSink] = None
    table: Optional[TableSinkSpec] = None
    checkpoint: Optional[str] = Field(default=None, description="default: <pipeline checkpoint>/<input>")
    output: SinkOutput = Field(default="all", description=(
        "of an operator: all (its panes and, with late_data_output or on_bad_element: dead_letter, its late data and "
        "dead letters, mixed as apply() returns them), panes (the panes only, their columns never null), side (the "
        "late data and dead letters only)"))

    @model_validator(mode="after")
    def _one(self) -> "SinkSpec":
        chosen = [n for n in SINK_KINDS if getattr(self, n) is not None]
        if len(chosen) != 1:
            raise ValueError(f"give exactly one sink kind ({', '.join(SINK_KINDS)}); got {', '.join(chosen) or 'none'}")
        return self


SINK_KINDS = ("console", "files", "memory", "foreach_batch", "table")


@dataclass(frozen=True)
class _ModeProbe:
    """What ``sinks.check_operator`` reads of an operator, from its spec (without building it)."""

    trigger: TriggerOption
    accumulation: Any
    name: str

    def label(self) -> str:
        return f"operator {self.name!r}"


# -- the pipeline -------------------------------------------------------------------------------------
_SPARK_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(milliseconds?|seconds?|minutes?|hours?|days?)\s*$", re.I)
_SPARK_UNITS = {"millisecond": 1, "second": 1_000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}


def _interval(value: Any) -> Any:
    """Spark's ``'5 seconds'`` as well as the library's ``'5s'``: milliseconds."""
    if isinstance(value, str):
        match = _SPARK_INTERVAL.match(value)
        if match is not None:
            return round(float(match.group(1)) * _SPARK_UNITS[match.group(2).lower().rstrip("s")])
        try:
            return _duration(value)
        except ValueError:
            raise ValueError(f"interval {value!r} is not a number with a unit, e.g. '5s' or '5 seconds'") from None
    return value


#: Milliseconds of processing time between micro-batches.
Interval = Annotated[int, BeforeValidator(_interval)]


class Pipeline(Spec):
    """A pipeline file, validated: its sources by name, its operators (each reading a source or
    another operator by name), its sinks, where its checkpoints go and its trigger interval; the
    references between them are checked (``reference_errors``), user code only as the ``CodePolicy``
    allows."""

    name: str = "pipeline"
    checkpoint: str = Field(default="checkpoints", description="directory of the queries' checkpoints")
    trigger_interval: Optional[Interval] = Field(default=None, gt=0, description=(
        "Spark processingTime trigger, e.g. '5 seconds' or '5s'; default: availableNow (run to the end)"))
    sources: dict[str, SourceSpec] = Field(min_length=1)
    operators: list[OperatorSpec] = Field(min_length=1)
    sinks: list[SinkSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self, info: ValidationInfo) -> "Pipeline":
        context = info.context or {}
        if context.get("defer_references"):
            return self  # the loader reports them with their locations
        errors = self.reference_errors(context.get("code", CodePolicy()))
        if errors:
            raise ValueError("; ".join(f"{'.'.join(map(str, loc))}: {msg}" for loc, msg in errors))
        return self

    def columns_of(self, name: str) -> Optional[list[str]]:
        """The columns of a source or an earlier operator's output (None: not known)."""
        if name in self.sources:
            source = self.sources[name]
            return RATE_COLUMNS if source.rate is not None else source.columns
        for op in self.operators:
            if op.name == name:
                return op.output_columns()
        return None

    def column_errors(self) -> list[tuple[tuple, str]]:
        """Columns an operator reads (key, timestamp, value, an accumulation's field) or a source
        marks its end of input with, that its input does not have."""
        errors: list[tuple[tuple, str]] = []
        for name, source in self.sources.items():
            marker, columns = source.end_of_input, source.columns
            if marker is not None and columns and marker not in columns:
                where = "files" if source.files is not None else "memory"
                errors.append((("sources", name, where, "end_of_input"),
                               f"column {marker!r} is not in the schema (columns: {', '.join(columns)})"))
        for i, op in enumerate(self.operators):
            sides = [("", op.input, InputSpec())] if op.input is not None else \
                [("left_options", op.left, op.left_options), ("right_options", op.right, op.right_options)]
            for side, input_name, options in sides:
                columns = self.columns_of(input_name) if input_name is not None else None
                if not columns:
                    continue
                reads = []  # (location, column)
                for what in ("key", "timestamp", "value"):
                    own = getattr(options, what)
                    column = own or getattr(op, what)
                    loc = ("operators", i, side, what) if own else ("operators", i, what)
                    if isinstance(column, dict):  # a value record: each field it reads
                        reads += [((*loc, field), read) for field, read in column.items()]
                    else:
                        reads.append((loc, column))
                if op.input is not None and op.value is None:
                    reads.append((("operators", i, "accumulation"), op.accumulation.field()))
                if op.window is not None and op.window.sessions is not None:
                    reads.append((("operators", i, "window", "sessions", "gap_field"), op.window.sessions.gap_field))
                if op.watermark is not None:
                    reads.append((("operators", i, "watermark", "partition"), op.watermark.partition))
                for loc, column in reads:
                    if column is not None and column not in columns:
                        errors.append((loc, f"column {column!r} is not in {input_name!r} "
                                            f"(columns: {', '.join(columns)})"))
        return errors

    def reference_errors(self, code: CodePolicy = CodePolicy()) -> list[tuple[tuple, str]]:
        """Names that do not resolve and user code that ``code`` does not allow, each with its location."""
        errors: list[tuple[tuple, str]] = []
        known = set(self.sources)
        for i, op in enumerate(self.operators):
            if op.name in known:
                errors.append((("operators", i, "name"), f"{op.name!r} is used twice (or is also a source name)"))
            fields = ["input"] if op.input is not None else ["left", "right"]
            for field, name in zip(fields, op.inputs):
                if name not in known:
                    errors.append((("operators", i, field), f"{name!r} is not a source or an earlier operator "
                                                             f"(known: {sorted(known)})"))
            for dotted in op.accumulation.code_paths():
                if not code.permits(dotted):
                    errors.append((("operators", i, "accumulation"), code.refusal(dotted, "refers to user code")))
            fed_by = [name for name in op.inputs if name in known and name not in self.sources]
            if fed_by and op.watermark is not None:
                errors.append((("operators", i, "watermark"), f"it reads the panes of operator {fed_by[0]!r} and follows "
                                                              "its watermark: remove watermark"))
            idle_at = ("operators", i, "watermark", "idle_timeout") if op.watermark is not None and \
                op.watermark.idle_timeout is not None else ("operators", i, "idle_timeout") \
                if op.idle_timeout is not None else None
            if idle_at is not None and not self.trigger_interval:
                errors.append((idle_at,
                               "an idle timeout needs trigger_interval: quiet time passes only in micro-batches "
                               "without data, which Spark runs with a processingTime trigger (under the default "
                               "availableNow the query would never end)"))
            if idle_at is None and not self.trigger_interval and needs_processing_time(
                    op.trigger, op.watermark.build() if op.watermark is not None else None):
                where = ("operators", i, "watermark", "fixed_lag") if op.watermark is not None and \
                    op.watermark.fixed_lag is not None else ("operators", i, "trigger")
                errors.append((where, "processing time decides this operator's panes, which needs trigger_interval "
                                      "(e.g. trigger_interval: 5s): processing time passes only in micro-batches, and "
                                      "without an interval Spark runs them back to back, each a stateful batch with "
                                      "its checkpoint files, for as long as the query runs"))
            markers = {marker for name in op.inputs if name in self.sources
                       if (marker := self.sources[name].end_of_input) is not None}
            if len(markers) > 1:
                errors.append((("operators", i), f"its inputs mark the end of input with different columns "
                                                 f"{sorted(markers)}: name the same column in both sources"))
            known.add(op.name)
        for i, sink in enumerate(self.sinks):
            if sink.input not in known:
                errors.append((("sinks", i, "input"), f"{sink.input!r} is not a source or operator "
                                                      f"(known: {sorted(known)})"))
            if sink.foreach_batch is not None and not code.permits(sink.foreach_batch.function):
                errors.append((("sinks", i, "foreach_batch"), code.refusal(sink.foreach_batch.function,
                                                                           "calls user code")))
            if sink.table is not None:
                errors += [(("sinks", i, "table", *loc), msg) for loc, msg in self._table_sink_errors(sink)]
            errors += [(("sinks", i, "output"), msg) for msg in self._output_errors(sink)]
        return errors + self.column_errors()  # (a column of an unknown input is not checked)

    def _output_errors(self, sink: SinkSpec) -> list[str]:
        """``output: panes`` or ``side`` takes part of an operator's output, ``side`` one that has some."""
        if sink.output == "all":
            return []
        if sink.input in self.sources:
            return [f"output: {sink.output} takes part of an operator's output; {sink.input!r} is a source (remove "
                    "output)"]
        spec = next((op for op in self.operators if op.name == sink.input), None)
        if spec is None:
            return []  # (reported as an unknown input)
        if sink.output == "side" and not (spec.late_data_output or spec.on_bad_element == "dead_letter"):
            return [f"output: side receives the late data and dead letters of operator {spec.name!r}, which has "
                    "neither: give it late_data_output: true or on_bad_element: dead_letter"]
        if sink.output == "side" and sink.table is not None:
            return ["output: side: a table sink keeps an operator's panes; send late data and dead letters to a "
                    "files, console, memory or foreach_batch sink"]
        return []

    def _table_sink_errors(self, sink: SinkSpec) -> list[tuple[tuple, str]]:
        """A table sink reads an operator's panes, in a mode they fit (``sinks.check_operator``)."""
        from ..sinks import check_operator

        assert sink.table is not None
        spec = next((op for op in self.operators if op.name == sink.input), None)
        if spec is None:
            return [((), f"a table sink keeps the panes of an operator; {sink.input!r} is a source")] \
                if sink.input in self.sources else []
        if spec.accumulation.code_paths():
            return []  # (user code is built only when the pipeline runs)
        probe = _ModeProbe(trigger=spec.trigger, accumulation=spec.accumulation.build(), name=spec.name)
        try:
            check_operator(probe, sink.table.mode, sink.table.final_only)
        except ValueError as exc:
            return [(("mode",), str(exc))]
        return []

    def build_operators(self) -> dict[str, Any]:
        """Every operator, by name; an operator fed by another must be able to consume its
        retractions (``chain.check_consumable``)."""
        from ..chain import check_consumable

        names = {op.name for op in self.operators}
        built = {op.name: op.build(fed=op.input in names) for op in self.operators}
        for spec in self.operators:
            for name in spec.inputs:
                if name in built:
                    check_consumable(built[name], built[spec.name])
        return built
