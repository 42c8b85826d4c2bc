"""A pipeline file's sources and sinks: what each reads or writes, validated (the Spark runner and
the local runner build them: ``spark/pipeline_run.py``, ``local_io.py``)."""
from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, Optional, Union

from pydantic import AfterValidator, Field, field_validator, model_validator

from ..ddl import parse_columns
from .choice import Choice, Spec

#: The columns of Spark's rate source.
RATE_COLUMNS = ["timestamp", "value"]


_END_OF_INPUT = ("a boolean column: a row where it is true is not data but ends the input (every window closes); "
                 "without it the input never ends")


# -- sources ------------------------------------------------------------------------------------------
def _valid_schema(text: str) -> str:
    parse_columns(text)  # raises naming the column and the type
    return text


#: A source's columns as Spark DDL, checked when the file loads.
SchemaDDL = Annotated[str, AfterValidator(_valid_schema)]


class FileSource(Spec):
    path: str
    format: Literal["json", "csv", "parquet"]
    schema_: SchemaDDL = Field(alias="schema", description="DDL, e.g. 'user string, amount bigint, ts timestamp'")
    max_files_per_trigger: Optional[int] = Field(default=None, gt=0)
    options: dict[str, str] = Field(default_factory=dict)
    end_of_input: Optional[str] = Field(default=None, description=_END_OF_INPUT)


class RateSource(Spec):
    rows_per_second: int = Field(default=100, gt=0)


class MemorySource(Spec):
    schema_: SchemaDDL = Field(alias="schema")
    rows: list[dict[str, Any]] = Field(min_length=1)
    rows_per_batch: int = Field(default=1_000, gt=0)
    end_of_input: Optional[str] = Field(default=None, description=_END_OF_INPUT)


class SourceSpec(Choice):
    what: ClassVar[str] = "source kind"

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
TABLE_URL_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg", "duckdb")
_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class TableSinkSpec(Spec):
    """A SQL table kept equal to the operator's current result (``windowed_operator.sinks.TableSink``).

    ``url``: ``sqlite:///results.db`` or ``duckdb:///results.duckdb`` (a path relative to the pipeline
    file) or ``postgresql://host:5432/db`` with no password in it: PostgreSQL takes the user and password from
    the environment (``PGUSER``, ``PGPASSWORD`` or a ``PGPASSFILE``); or ``url_env``: the name of an
    environment variable holding the whole URL.  Credentials never come from the file."""

    url: Optional[str] = None
    url_env: Optional[str] = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    table: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    mode: Literal["upsert", "add"] = "upsert"
    columns: list[Literal["timing", "pane_index", "is_last", "batch_id", "fired_by", "firing_watermark"]] = Field(
        default_factory=list)
    final_only: bool = False
    value_type: Optional[str] = None
    name: Optional[str] = Field(default=None, description="the sink's name in the progress table (default: table)")
    audit: Union[bool, Annotated[int, Field(gt=0)]] = Field(default=False, description=(
        "also keep a row per applied batch in windowed_operator_sink_batches: true (every batch) or the number of "
        "batches of each query to keep"))

    @field_validator("url")
    @classmethod
    def _url(cls, url: Optional[str]) -> Optional[str]:
        if url is None:
            return url
        match = _URL_SCHEME.match(url)
        scheme = match.group(1).lower() if match else None
        if scheme not in TABLE_URL_SCHEMES:
            raise ValueError(f"url {url!r}: the scheme must be one of {', '.join(TABLE_URL_SCHEMES)} "
                             "(e.g. sqlite:///results.db, duckdb:///results.duckdb, postgresql://host:5432/db)")
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
                         query_id=query_id, audit=self.audit)


#: What of an operator's output a sink receives (``windowed_operator.spark.plan.outputs``).
SinkOutput = Literal["all", "panes", "side"]


class SinkSpec(Choice):
    what: ClassVar[str] = "sink kind"
    kinds: ClassVar[Optional[tuple[str, ...]]] = ("console", "files", "memory", "foreach_batch", "table")

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


