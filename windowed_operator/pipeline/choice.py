"""The base of a pipeline file's models, and a choice: exactly one of several named kinds
(``{"sum": {...}}``, ``{"tumbling": {...}}``, ``{"files": {...}}``)."""
from __future__ import annotations

from typing import Any, ClassVar, Optional

from pydantic import BaseModel, ConfigDict, model_validator


class Spec(BaseModel):
    """A part of a pipeline file: frozen; a key the model does not know is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Choice(Spec):
    """Exactly one of the model's kinds is given: its fields (``kinds``: some of them), each None
    unless the file names it; ``what`` names the choice in the error."""

    what: ClassVar[str]
    kinds: ClassVar[Optional[tuple[str, ...]]] = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "Choice":
        fields = type(self).model_fields
        kinds = [(name, info.alias or name) for name, info in fields.items()
                 if self.kinds is None or name in self.kinds]
        chosen = [label for name, label in kinds if getattr(self, name) is not None]
        if len(chosen) != 1:
            raise ValueError(f"give exactly one {self.what} ({', '.join(label for _, label in kinds)}); got "
                             f"{', '.join(chosen) or 'none'}")
        self.check_chosen(*self.chosen())
        return self

    def check_chosen(self, name: str, args: Any) -> None:
        """Checks of the kind given (none unless a choice adds them)."""

    def chosen(self) -> tuple[str, Any]:
        """The kind given (as the file names it) and its arguments."""
        fields = type(self).model_fields
        field = next(n for n in fields if (self.kinds is None or n in self.kinds) and getattr(self, n) is not None)
        return fields[field].alias or field, getattr(self, field)
