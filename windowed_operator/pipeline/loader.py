"""Loading a pipeline file (YAML or JSON) and reporting every error with its line and path.

The file is parsed with PyYAML's safe loader (JSON is read as YAML, so both get line numbers):
no tags, no objects, no code.  Errors come from three places: the syntax (alone: without a
document nothing else can be checked), the pydantic models (each error's location is mapped back to
its line), and the checks of a whole pipeline: names that do not resolve (an operator's input, a
sink's input, user code the command did not allow), columns an input lacks, paths, missing inputs
and allowed user code that cannot be imported.  The models' errors and the checks are reported
together: where the models refuse the file, the checks that need no whole pipeline (paths, inputs,
user code) run on the sources, sinks and accumulations that are valid by themselves.

A pipeline file is input, not a program: it cannot allow code for itself (the ``CodePolicy`` comes
from the command line), its paths stay inside its own directory unless the command allows more,
and its size and the expansion of its YAML aliases are bounded (a few hundred bytes of nested
aliases otherwise expand to gigabytes).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import yaml
from pydantic import ValidationError

from ..sinks.dialects import file_database
from .endpoints import SinkSpec, SourceSpec
from .document import Pipeline, reference_errors
from .spec import AccumulationSpec
from .user_code import CodePolicy, CodeUse, import_errors

#: Largest pipeline file read (pipelines are a few kilobytes; an in-memory source's rows add some).
MAX_FILE_BYTES = 1_000_000
#: Most nodes the document may have once its YAML aliases are expanded.
MAX_EXPANDED_NODES = 100_000
#: How deep values may nest (a pipeline nests a few levels; the YAML parser recurses per level).
MAX_NESTING_DEPTH = 64


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


def _duplicate_keys(node: Any, path: tuple = ()) -> list[PipelineIssue]:
    """Keys given twice in one mapping: YAML (and JSON) parsers keep the last silently."""
    issues: list[PipelineIssue] = []
    if isinstance(node, yaml.MappingNode):
        first: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            line = key_node.start_mark.line + 1
            if key in first:
                issues.append(PipelineIssue(_format_path(path + (key,)), line,
                                            f"duplicate key {key!r} (first at line {first[key]}); only one may be "
                                            "given"))
            else:
                first[key] = line
            issues += _duplicate_keys(value_node, path + (key,))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            issues += _duplicate_keys(item, path + (i,))
    return issues


def _line_of(index: dict, loc: tuple) -> int:
    loc = tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))
    while loc and loc not in index:
        loc = loc[:-1]
    return index.get(loc, 0)


def _expanded_size(node: yaml.Node, limit: int) -> int:
    """How many nodes the document has with every alias expanded, counted without expanding (an
    alias is the same node object, so sizes are memoized per node); stops counting past ``limit``."""
    sizes: dict[int, int] = {}

    def size(current: yaml.Node) -> int:
        known = sizes.get(id(current))
        if known is not None:
            return known
        total = 1
        if isinstance(current, yaml.MappingNode):
            for key_node, value_node in current.value:
                total += size(key_node) + size(value_node)
                if total > limit:
                    break
        elif isinstance(current, yaml.SequenceNode):
            for item in current.value:
                total += size(item)
                if total > limit:
                    break
        sizes[id(current)] = total
        return total

    return size(node)


def _too_deep(source: str) -> PipelineError:
    return PipelineError(source, [PipelineIssue("", 0, f"values nest more than {MAX_NESTING_DEPTH} levels deep (a "
                                                       "pipeline's values nest a few levels)")])


def _depth(node: yaml.Node, limit: int) -> int:
    """How deep collections nest in the document (iteratively, stopping past ``limit``)."""
    deepest, stack = 0, [(node, 1)]
    seen: set[int] = set()
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        if id(current) in seen:  # (an alias: the same node again)
            continue
        seen.add(id(current))
        if isinstance(current, yaml.MappingNode):
            stack.extend((part, depth + 1) for pair in current.value for part in pair)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in current.value)
    return deepest


def _syntax_error(source: str, exc: yaml.YAMLError) -> PipelineError:
    mark = getattr(exc, "problem_mark", None)
    return PipelineError(source, [PipelineIssue("", mark.line + 1 if mark else 0,
                                                f"not valid YAML/JSON: {getattr(exc, 'problem', exc)}")])


def _compose(text: str, source: str) -> Optional[yaml.Node]:
    if len(text.encode()) > MAX_FILE_BYTES:
        raise PipelineError(source, [PipelineIssue("", 0, f"the file has {len(text.encode()):,} bytes; pipeline files "
                                                          f"are limited to {MAX_FILE_BYTES:,} (put data in sources)")])
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise _syntax_error(source, exc) from None
    except RecursionError:  # (the YAML parser recurses per level of nesting)
        raise _too_deep(source) from None
    if node is not None and _depth(node, MAX_NESTING_DEPTH) > MAX_NESTING_DEPTH:
        raise _too_deep(source)
    if node is not None and _expanded_size(node, MAX_EXPANDED_NODES) > MAX_EXPANDED_NODES:
        raise PipelineError(source, [PipelineIssue("", 0, f"the document expands to more than {MAX_EXPANDED_NODES:,} "
                                                          "values through YAML aliases (&anchor / *alias)")])
    return node


_FILE_CANNOT_ALLOW_CODE = ("a pipeline file cannot allow code for itself: whoever runs it does "
                           "(windowed-operator run --allow-code, or --allow-module package.module)")


def parse_pipeline(text: str, source: str = "<pipeline>", code: CodePolicy = CodePolicy()) -> Pipeline:
    """``code``: which user code the pipeline may import (none unless the caller says so)."""
    pipeline, _, index, issues = _parse(text, source)
    if pipeline is None:
        raise PipelineError(source, issues)
    issues = _issues(index, reference_errors(pipeline, code))
    if issues:
        raise PipelineError(source, issues)
    return pipeline


def _parse(text: str, source: str) -> tuple[Optional[Pipeline], dict, dict, list[PipelineIssue]]:
    """The pipeline (None when the models refuse the file), the document as data, its line index,
    and the models' errors; a file that is not a pipeline document at all (syntax, duplicate keys,
    not a mapping) raises."""
    node = _compose(text, source)
    duplicates = _duplicate_keys(node)
    if duplicates:
        raise PipelineError(source, duplicates)
    data: Any = None
    if node is not None:
        constructor = yaml.SafeLoader(text)
        try:
            data = constructor.construct_document(node)
        except yaml.YAMLError as exc:
            raise _syntax_error(source, exc) from None
        finally:
            constructor.dispose()
    if not isinstance(data, dict):
        raise PipelineError(source, [PipelineIssue("", 1, "a pipeline is a mapping with sources, operators, sinks")])
    index = _line_index(node) if node is not None else {}
    try:
        return Pipeline.model_validate(data, context={"defer_references": True}), data, index, []
    except ValidationError as exc:
        issues = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = _FILE_CANNOT_ALLOW_CODE if loc == ("allow_code",) else f"unknown field {loc[-1]!r}"
            issues.append(PipelineIssue(_format_path(loc), _line_of(index, loc), message))
        return None, data, index, issues


def _issues(index: dict, errors: list[tuple[tuple, str]]) -> list[PipelineIssue]:
    return [PipelineIssue(_format_path(loc), _line_of(index, loc), msg) for loc, msg in errors]


def load_pipeline(path: Union[str, Path], code: CodePolicy = CodePolicy(), outside_paths: bool = False,
                  require_inputs: bool = False) -> Pipeline:
    """Relative paths in the file (sources, sinks, checkpoints) are relative to the file's directory,
    and every path must stay inside it unless ``outside_paths`` (the CLI's ``--allow-outside-paths``).
    ``require_inputs``: a files source whose path does not exist is an error (the CLI's commands:
    Spark would only say so after starting).  User code the pipeline may run (``code``) is imported
    here, with the file's directory on the module path (so a module beside the file is found), and a
    module that cannot be imported is an error.  Every error of every check is reported at once: when
    the models refuse part of the file, the checks that need no whole pipeline (paths, inputs, user
    code) still run on each source, sink and accumulation that is valid by itself."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(str(path), [PipelineIssue("", 0, "no such file")])
    text = path.read_text()
    pipeline, data, index, issues = _parse(text, str(path))
    parts = _Parts.of(pipeline) if pipeline is not None else _Parts.valid_in(data)
    resolved, path_issues = _resolved_paths(parts, path.parent, outside_paths)
    issues += path_issues
    if require_inputs:
        issues += _issues(index, _missing_inputs(resolved.sources))
    if pipeline is not None:
        issues += _issues(index, reference_errors(pipeline, code))
    else:  # (with a whole pipeline, ``reference_errors`` refuses code the command did not allow)
        issues += _issues(index, [(loc, code.refusal(dotted, what)) for loc, dotted, what in parts.code
                                  if not code.permits(dotted)])
    issues += _issues(index, import_errors(parts.code, code, path.parent))
    if issues:
        raise PipelineError(str(path), sorted(issues, key=lambda issue: issue.line))
    assert pipeline is not None
    return pipeline.model_copy(update={"sources": resolved.sources, "sinks": resolved.sinks,
                                       "checkpoint": resolved.checkpoint})


@dataclass(frozen=True)
class _Parts:
    """What the checks that need no whole pipeline read: the sources, the sinks (None where a sink is
    not valid by itself), the checkpoint and the user code referred to."""

    sources: dict[str, SourceSpec]
    sinks: list[Optional[SinkSpec]]
    checkpoint: Optional[str]
    code: list[CodeUse]

    @staticmethod
    def of(pipeline: Pipeline) -> "_Parts":
        return _Parts(dict(pipeline.sources), list(pipeline.sinks), pipeline.checkpoint, _code_uses(
            [op.accumulation for op in pipeline.operators], list(pipeline.sinks)))

    @staticmethod
    def valid_in(data: dict) -> "_Parts":
        """The parts of a document the models refuse as a whole that are valid by themselves."""
        def valid(model: Any, value: Any) -> Any:
            try:
                return model.model_validate(value)
            except ValidationError:
                return None

        def items(key: str, kind: type) -> Any:
            value = data.get(key)
            return value if isinstance(value, kind) else kind()

        sources = {name: spec for name, value in items("sources", dict).items()
                   if isinstance(name, str) and (spec := valid(SourceSpec, value)) is not None}
        sinks = [valid(SinkSpec, value) for value in items("sinks", list)]
        accumulations = [valid(AccumulationSpec, op.get("accumulation")) if isinstance(op, dict) else None
                         for op in items("operators", list)]
        checkpoint = data.get("checkpoint", Pipeline.model_fields["checkpoint"].default)
        return _Parts(sources, sinks, checkpoint if isinstance(checkpoint, str) else None,
                      _code_uses(accumulations, sinks))


def _code_uses(accumulations: list[Optional[AccumulationSpec]], sinks: list[Optional[SinkSpec]]) -> list[CodeUse]:
    """The user code of each operator's accumulation and each sink (by position; None: not valid)."""
    used = [(("operators", i, "accumulation"), dotted, "refers to user code")
            for i, accumulation in enumerate(accumulations) if accumulation is not None
            for dotted in accumulation.code_paths()]
    return used + [(("sinks", i, "foreach_batch"), sink.foreach_batch.function, "calls user code")
                   for i, sink in enumerate(sinks) if sink is not None and sink.foreach_batch is not None]


def _missing_inputs(sources: dict[str, SourceSpec]) -> list[tuple[tuple, str]]:
    out = []
    for name, spec in sources.items():
        if spec.files is None or any(c in spec.files.path for c in "*?["):
            continue
        if not Path(spec.files.path).exists():
            out.append((("sources", name, "files", "path"),
                        f"{spec.files.path!r} does not exist: nothing to read (the examples write their data with "
                        "python examples/pipelines/run.py NAME)"))
    return out


def _resolved_paths(parts: _Parts, base: Path, outside_paths: bool) -> tuple[_Parts, list[PipelineIssue]]:
    root = base.resolve()
    issues: list[PipelineIssue] = []

    def absolute(value: str, where: str) -> str:
        resolved = (root / value).resolve()
        if not outside_paths and not resolved.is_relative_to(root):
            issues.append(PipelineIssue(where, 0, f"path {value!r} leaves the pipeline's directory {str(root)!r}; "
                                                  "run with --allow-outside-paths to allow it"))
        return str(resolved)

    sources = {}
    for name, spec in parts.sources.items():
        if spec.files is not None:
            files = spec.files.model_copy(update={"path": absolute(spec.files.path, f"sources.{name}.files.path")})
            spec = spec.model_copy(update={"files": files})
        sources[name] = spec
    sinks: list[Optional[SinkSpec]] = []
    for i, sink in enumerate(parts.sinks):
        if sink is None:
            sinks.append(None)
            continue
        updates: dict = {}
        if sink.files is not None:
            updates["files"] = sink.files.model_copy(update={"path": absolute(sink.files.path,
                                                                               f"sinks[{i}].files.path")})
        if sink.checkpoint is not None:
            updates["checkpoint"] = absolute(sink.checkpoint, f"sinks[{i}].checkpoint")
        found = file_database(sink.table.url) if sink.table is not None and sink.table.url is not None else None
        if found is not None and sink.table is not None:  # (sqlite:////abs/path: absolute)
            database, file = found
            updates["table"] = sink.table.model_copy(update={
                "url": f"{database}:///" + absolute(file.split("?", 1)[0], f"sinks[{i}].table.url")})
        sinks.append(sink.model_copy(update=updates))
    checkpoint = absolute(parts.checkpoint, "checkpoint") if parts.checkpoint is not None else None
    return _Parts(sources, sinks, checkpoint, parts.code), issues
