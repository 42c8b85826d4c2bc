"""Loading a pipeline file (YAML or JSON) and reporting every error with its line and path.

The file is parsed with PyYAML's safe loader (JSON is read as YAML, so both get line numbers):
no tags, no objects, no code.  Errors come from three places, all reported together: the syntax,
the pydantic models (each error's location is mapped back to its line), and names that do not
resolve (an operator's input, a sink's input, user code without ``allow_code``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import yaml
from pydantic import ValidationError

from .spec import Pipeline


@dataclass(frozen=True)
class PipelineIssue:
    path: str  # "operators[0].window.sessions.gap"
    line: int  # 1-based; 0 when unknown
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "file"
        return f"{where}: {self.path or '<root>'}: {self.message}"


class PipelineError(ValueError):
    def __init__(self, source: str, issues: list[PipelineIssue]) -> None:
        self.source = source
        self.issues = issues
        super().__init__(f"{source}: {len(issues)} error(s)\n" + "\n".join(f"  {i}" for i in issues))


def _format_path(loc: tuple) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _line_index(node: yaml.Node, path: tuple = (), index: dict | None = None) -> dict:
    """Map every path in the document to the 1-based line where its value starts."""
    index = {} if index is None else index
    index[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            index[path + (key,)] = key_node.start_mark.line + 1
            _line_index(value_node, path + (key,), index)
            index[path + (key,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_index(item, path + (i,), index)
    return index


def _line_of(index: dict, loc: tuple) -> int:
    loc = tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))
    while loc and loc not in index:
        loc = loc[:-1]
    return index.get(loc, 0)


def parse_pipeline(text: str, source: str = "<pipeline>") -> Pipeline:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise PipelineError(source, [PipelineIssue("", mark.line + 1 if mark else 0,
                                                   f"not valid YAML/JSON: {getattr(exc, 'problem', exc)}")]) from None
    if not isinstance(data, dict):
        raise PipelineError(source, [PipelineIssue("", 1, "a pipeline is a mapping with sources, operators, sinks")])
    index = _line_index(node) if node is not None else {}
    try:
        pipeline = Pipeline.model_validate(data, context={"defer_references": True})
    except ValidationError as exc:
        issues = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = f"unknown field {loc[-1]!r}"
            issues.append(PipelineIssue(_format_path(loc), _line_of(index, loc), message))
        raise PipelineError(source, issues) from None
    references = pipeline.reference_errors()
    if references:
        raise PipelineError(source, [PipelineIssue(_format_path(loc), _line_of(index, loc), msg)
                                     for loc, msg in references])
    return pipeline


def load_pipeline(path: Union[str, Path]) -> Pipeline:
    """Relative paths in the file (sources, sinks, checkpoints) are relative to the file's directory."""
    path = Path(path)
    if not path.exists():
        raise PipelineError(str(path), [PipelineIssue("", 0, "no such file")])
    return resolve_paths(parse_pipeline(path.read_text(), str(path)), path.parent)


def resolve_paths(pipeline: Pipeline, base: Path) -> Pipeline:
    def absolute(value: str) -> str:
        return value if Path(value).is_absolute() else str((base / value).resolve())

    sources = {name: spec.model_copy(update={"files": spec.files.model_copy(update={"path": absolute(spec.files.path)})})
               if spec.files is not None else spec for name, spec in pipeline.sources.items()}
    sinks = []
    for sink in pipeline.sinks:
        updates: dict = {}
        if sink.files is not None:
            updates["files"] = sink.files.model_copy(update={"path": absolute(sink.files.path)})
        if sink.checkpoint is not None:
            updates["checkpoint"] = absolute(sink.checkpoint)
        sinks.append(sink.model_copy(update=updates))
    return pipeline.model_copy(update={"sources": sources, "sinks": sinks,
                                       "checkpoint": absolute(pipeline.checkpoint)})
