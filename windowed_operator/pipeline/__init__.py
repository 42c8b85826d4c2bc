"""Declarative pipelines: a YAML/JSON file of sources, operators and sinks, validated, then run."""
from .loader import PipelineError, PipelineIssue, load_pipeline, parse_pipeline
from .spec import Pipeline

__all__ = ["Pipeline", "PipelineError", "PipelineIssue", "load_pipeline", "parse_pipeline"]
