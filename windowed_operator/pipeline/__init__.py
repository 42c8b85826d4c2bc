"""Declarative pipelines: a YAML/JSON file of sources, operators and sinks, validated, then run."""
from .loader import PipelineError, PipelineIssue, load_pipeline, parse_pipeline
from .document import Pipeline
from .user_code import CodePolicy

__all__ = ["CodePolicy", "Pipeline", "PipelineError", "PipelineIssue", "load_pipeline", "parse_pipeline"]
