"""A pipeline file's operators: windows, accumulations, watermarks and the operator, validated.

Everything is named with its parameters (``{"sum": {"field": "amount"}}``, ``{"sessions": {"gap":
"30s"}}``); durations take units (``"10s"``).  A window family and an accumulation are each one row
of a table (``WINDOWS``, ``ACCUMULATIONS``) naming the public class it builds: the parameters a file
gives are that class's fields, with their constraints, defaults and descriptions.  User code is
referred to only by a dotted path, imported only as the command allows (``user_code.CodePolicy``).
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Optional, Union, get_args

from pydantic_core import PydanticUndefined
from pydantic import (Field, ValidationError, create_model, model_validator)

from accumulations import (AllMax, ApproxCountDistinct, ApproxPercentile, Cogroup, Count, CountDistinct, FullOuterJoin,
                           InnerJoin, LeftOuterJoin, Max, Mean, Min, Quantiles, Sum, ToList, TopN)
from accumulations.base import Accumulation
from accumulations.merge import MergeAccumulation
from triggers.option import TriggerOption

from ..config import Duration
from ..merge_operator import InputOptions, KeyedWindowedMergeOperator, MergeOperatorBase, WindowedMergeOperator
from ..operator import KeyedWindowedOperator, OnBadElement, WindowedOperator, WindowingOptions
from ..panes import FIRING_COLUMNS, OUTPUT_COLUMNS, SIDE_OUTPUT_COLUMNS
from ..watermarks import BoundedDisorderWatermark, FixedLagWatermark, UpstreamWatermark
from ..windows import CumulativeWindows, GlobalWindow, SessionWindows, SlidingWindows, TimeWindows
from ..windows.base import WindowOption
from .choice import Choice, Spec
from .user_code import import_dotted


#: The columns of an operator's panes without ``key`` (``panes.OUTPUT_COLUMNS``), and ``index``: the
#: local runner's name of ``pane_index``, beside it.
_AFTER_PANE_INDEX = OUTPUT_COLUMNS.index("pane_index") + 1
PANE_COLUMNS = (*OUTPUT_COLUMNS[1:_AFTER_PANE_INDEX], "index", *OUTPUT_COLUMNS[_AFTER_PANE_INDEX:])


# -- windows ------------------------------------------------------------------------------------------
class FileWindow(NamedTuple):
    """A window family as a file names it: the class it builds and, for each parameter a file gives,
    the class's field it sets (with that field's constraints, default and description)."""

    cls: type[WindowOption]
    fields: dict[str, str]
    required: tuple[str, ...] = ()  # parameters a file must give though the class has a default
    one_of: tuple[str, ...] = ()  # parameters of which a file gives exactly one

    def column_parameters(self) -> list[str]:
        """The parameters naming a column (the class's field takes a column, code or an expression)."""
        return [p for p, field in self.fields.items() if self.cls.model_fields[field].annotation is Any]


#: A file's window names (one row per family; ``hopping`` is ``TimeWindows`` with a period).
WINDOWS: dict[str, FileWindow] = {
    "tumbling": FileWindow(TimeWindows, {"size": "size", "offset": "offset"}),
    "hopping": FileWindow(TimeWindows, {"size": "size", "slide": "period", "offset": "offset"}, required=("slide",)),
    "sessions": FileWindow(SessionWindows, {"gap": "min_gap", "gap_field": "gap"}, one_of=("gap", "gap_field")),
    "sliding": FileWindow(SlidingWindows, {"size": "size"}),
    "cumulative": FileWindow(CumulativeWindows, {"max_size": "max_size", "step": "step", "offset": "offset"}),
    "global": FileWindow(GlobalWindow, {}),
}


def _window_parameter(row: FileWindow, name: str) -> Any:
    """A file parameter of a window family: its class field's annotation and constraints (a field
    that takes code or a column takes a column's name in a file), required where the row says."""
    info: Any = copy.copy(row.cls.model_fields[row.fields[name]])
    annotation: Any = info.annotation
    if name in row.column_parameters():
        annotation, info = Optional[str], Field(default=None, min_length=1, description="the column holding it")
    if name in row.required:
        info.default, annotation = PydanticUndefined, get_args(annotation)[0]  # (Optional[X] -> X)
    return annotation, info


#: Each window family's parameters in a file, derived from its class (``_window_parameter``).
WINDOW_ARGS: dict[str, type[Spec]] = {
    name: create_model(f"{name.title()}Window", __base__=Spec,
                       **{p: _window_parameter(row, p) for p in row.fields})
    for name, row in WINDOWS.items()}


class _WindowChoice(Choice):
    """One of ``WINDOWS`` by name with its parameters (the fields are made from the table: ``WindowSpec``)."""

    what: ClassVar[str] = "window"

    def check_chosen(self, name: str, args: Any) -> None:
        one_of = WINDOWS[name].one_of
        given = [p for p in one_of if getattr(args, p) is not None]
        if one_of and len(given) != 1:
            raise ValueError(f"{name}: give exactly one of {', '.join(one_of)}; got {', '.join(given) or 'none'}")
        try:
            self.build()  # (the class's own checks across parameters, e.g. a slide within the size)
        except ValidationError as exc:
            raise ValueError(f"{name}: " + "; ".join(error["msg"].removeprefix("Value error, ")
                                                     for error in exc.errors())) from None

    def build(self) -> WindowOption:
        name, args = self.chosen()
        row = WINDOWS[name]
        return row.cls(**{row.fields[p]: v for p, v in args.model_dump(exclude_none=True).items()})


if TYPE_CHECKING:  # (a model made at import: a type checker sees its base)
    WindowSpec = _WindowChoice
else:
    WindowSpec = create_model(
        "WindowSpec", __base__=_WindowChoice, __doc__="One of: " + ", ".join(WINDOWS) + ".",
        **{f"{name}_" if name == "global" else name: (Optional[model], Field(default=None, alias=name))
           for name, model in WINDOW_ARGS.items()})


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


class _AccumulationChoice(Choice):
    """One of ``ACCUMULATIONS`` by name with the class's parameters, or ``code``: a class of user code
    (the fields are made from the table: ``AccumulationSpec``)."""

    what: ClassVar[str] = "accumulation"
    if TYPE_CHECKING:
        code: Optional[CodeArgs]

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
    fired_by: bool = _option(WindowingOptions, "fired_by")
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
        columns = (["key"] if keyed else []) + list(PANE_COLUMNS) + (list(FIRING_COLUMNS) if self.fired_by else [])
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
            fired_by=self.fired_by, on_bad_element=self.on_bad_element, max_future_skew=self.max_future_skew, name=self.name)
        keyed = self.key is not None or self.left_options.key is not None
        key: dict[str, Any] = {"key": self.key} if keyed else {}
        if self.input is not None:
            cls = KeyedWindowedOperator if keyed else WindowedOperator
            return cls(**common, **key)
        sides: dict[str, Any] = {"left": InputOptions(**self.left_options.model_dump()),
                                 "right": InputOptions(**self.right_options.model_dump())}
        merge_cls = KeyedWindowedMergeOperator if keyed else WindowedMergeOperator
        return merge_cls(**common, **sides, idle_timeout=self.idle_timeout, **key)
