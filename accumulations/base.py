"""The Accumulation protocol: the business logic of a windowed operator.

An accumulation folds inputs ``I`` into an accumulated value ``A`` and reads an output ``O`` from
it.  ``merge`` is required (not optional) because sessions merge windows and panes combine
partial results; ``get_retraction`` says what a downstream consumer must add to undo an output.
"""
from __future__ import annotations

import numbers
from typing import Any, ClassVar, Generic, Optional, TypeVar

from .config import Config

I = TypeVar("I")
A = TypeVar("A")
O = TypeVar("O")


class Accumulation(Config, Generic[I, A, O]):
    """Subclass and implement the five methods; ``subtract`` is optional (an inverse of accumulate).

    The runtime creates a window's accumulator with ``default_accumulated_value``, folds each input
    in with ``accumulate`` (or a batch of them with the vectorized ``fold_array`` /
    ``fold_segments``), combines partial accumulators with ``merge``, reads each pane's value with
    ``get_output`` and each retraction's with ``get_retraction``.

    Accumulations are pydantic models (``accumulations.config.Config``) so their parameters are
    validated and they can be named in pipeline files; they must be picklable: the Spark runner
    ships them to executors.
    """

    def default_accumulated_value(self) -> A:
        """The accumulated value of a window that has no input yet.

        The runtime calls it once for each new window (and for each new (key, pane) partial that a
        runner folds before the shuffle), then folds the window's inputs into it with
        ``accumulate`` or ``fold_array``.  Must return a fresh value on every call (the runtime owns
        and may update what it gets), equal to folding no input: ``merge(default, a) == a``.  On
        Spark it is stored in the checkpoint, so it must be plain data (numbers, strings, lists,
        dicts, bytes) unless ``apply(..., state_encoding="pickle")``.
        """
        raise NotImplementedError

    def accumulate(self, accumulated: A, value: I) -> A:
        """Fold one input into a window's accumulated value and return the result.

        The runtime calls it for each element of each window the element is assigned to (a hopping
        window's element once per window or pane), in the order elements arrive within a bundle;
        ``value`` is what the operator's ``value=`` extracted.  It may update ``accumulated`` in
        place and return it (the runtime owns accumulated values; outputs are copies).  Must agree
        with ``merge``: folding inputs into two accumulators and merging them equals folding all
        of them into one (Beam's ``CombineFn`` rule), since sessions, panes and pre-aggregation
        fold in parts.  A value it cannot fold should raise; readers check nulls before it is called.
        """
        raise NotImplementedError

    def merge(self, a1: A, a2: A) -> A:
        """Combine two accumulated values of the same key into one and return it.

        Required: the runtime calls it when sessions merge, when a window is read from the panes it
        spans (pane sharing), when partials folded before the shuffle reach a window, and when the
        pane and window logs fold the parts written by earlier micro-batches (in the order they
        were written, ``a1`` the earlier).  Must be associative, with
        ``default_accumulated_value()`` as its identity, and agree with ``accumulate``; it may
        reuse ``a1`` or ``a2``.
        """
        raise NotImplementedError

    def get_output(self, accumulated: A) -> O:
        """The value of a pane: what a window's accumulated value outputs when its trigger fires.

        The runtime calls it each time a pane of the window fires (early, on time or late; in
        accumulating modes the accumulated value keeps growing between calls) and keeps the result
        as the window's last output, for the next retraction and for ``fire_only_updated_panes``.
        Must not change ``accumulated``; the result must be plain data, and on Spark of the type
        ``output_type`` names.
        """
        raise NotImplementedError

    def get_retraction(self, output: O) -> O:
        """The value of the retraction of an earlier pane whose value was ``output``.

        In accumulating-and-retracting mode the runtime calls it before each re-fired pane of a
        window (with the window's last output), and when a fired session disappears into a merge.
        By default a number retracts as its negation (so panes and retractions sum to the final
        value); anything else retracts as itself, marked by the record's ``is_retraction`` flag.
        Must be its own inverse (a negation or the identity): a downstream stage reads the output
        a retraction undoes as ``get_retraction(retraction)``."""
        if isinstance(output, numbers.Number) and not isinstance(output, bool):
            return -output  # type: ignore[operator]  # typeshed's numbers.Number has no __neg__; every number has
        return output

    def is_result(self, output: O) -> bool:
        """Whether a pane whose value is ``output`` is emitted.  The runtime calls it for every pane it
        fires; a pane that is no result is not emitted and does not count (no index, no retraction
        later), as an unchanged pane under ``fire_only_updated_panes``.  True by default: every
        pane is a result; a join's empty list of pairs is none (as SQL emits no row)."""
        return True

    #: Set to a callable ``subtract(accumulated, value) -> accumulated`` when the fold is invertible.
    def supports_subtract(self) -> bool:
        """Whether ``subtract`` is implemented: a chain refuses, when it is built, a stage without it
        after a retracting stage (it could not fold the retractions out)."""
        return type(self).subtract is not Accumulation.subtract

    def subtract(self, accumulated: A, value: I) -> A:
        """Optional: fold ``value`` back out of ``accumulated`` (the inverse of ``accumulate``).

        The runtime calls it in a stage fed by a retracting stage (a chain, or a pipeline file's
        operator whose input is an operator), for each upstream retraction, with the output the
        retraction undoes.  Must hold: ``subtract(accumulate(a, v), v) == a`` for the outputs it
        is given.  ``Sum``, ``Count``, ``Mean`` and ``CountDistinct`` implement it.
        """
        raise NotImplementedError(f"{type(self).__name__} has no inverse")

    def output_type(self, input_type: str) -> Optional[str]:
        """The output's type as a DDL type string (``bigint``, ``double``, ``array<string>``) given the
        input's, or None when it cannot be known; runners with typed outputs (Spark) need it."""
        return None

    def input_field(self) -> Optional[str]:
        """The input field this accumulation reads, if it reads one."""
        return None

    def folds_whole_input(self) -> bool:
        """Whether each input itself is what is folded (``Sum()``, not ``Sum("amount")`` or
        ``Count()``), so that a null input cannot be folded: the reader makes it a bad element, as
        it does a null field.  Functions of the user's (``Reduce``, ``Combine``) may take None."""
        return False

    def input_type_refusal(self, input_type: str) -> Optional[str]:
        """Why inputs of this DDL type cannot be folded (what the accumulation takes), or None when
        they can: a runner with typed inputs (Spark) refuses the column before any row is read."""
        return None

    def supports_fold_array(self) -> bool:
        """Whether ``fold_array`` is implemented (the vectorized fast path uses it)."""
        return type(self).fold_array is not Accumulation.fold_array

    def fold_array(self, values: Any) -> A:
        """The accumulated value of a numpy array of inputs (already extracted by ``input_field``),
        equal to folding them one by one from ``default_accumulated_value``; Python scalars out."""
        raise NotImplementedError(f"{type(self).__name__} has no vectorized form")

    def partials_are_bytes(self) -> bool:
        """Whether accumulators are bytes that ``merge`` combines (sketches): a runner may then fold
        each (key, pane) of a micro-batch into one accumulator before the shuffle and ship that."""
        return False

    def folds_rows(self) -> bool:
        """Whether ``fold_array`` also takes whole inputs as ``accumulations.rows.Rows`` (columns of
        rows), for accumulations that keep inputs rather than a field of them."""
        return False

    def fold_segments(self, values: Any, starts: Any) -> list:
        """``fold_array`` of each segment ``values[starts[i]:starts[i + 1]]`` (the last runs to the
        end); numeric accumulations override it with one ``ufunc.reduceat`` call."""
        bounds = [*starts.tolist(), len(values)]
        return [self.fold_array(values[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]

    def accumulate_all(self, accumulated: A, values: list[I]) -> A:
        """Fold many values; accumulations with a vectorized form override this."""
        for value in values:
            accumulated = self.accumulate(accumulated, value)
        return accumulated


class FieldAccumulation(Accumulation[Any, A, O]):
    """An accumulation over one field of each input (``Sum(field="amount")``) or the input itself."""

    _positional: ClassVar[tuple[str, ...]] = ("field",)
    field: Optional[str] = None

    def input_field(self) -> Optional[str]:
        """The ``field`` given, or None when the input itself is folded."""
        return self.field

    def folds_whole_input(self) -> bool:
        """True without a ``field``: the input itself is folded, so a null input is a bad element."""
        return self.field is None

    def extract(self, value: Any) -> Any:
        """The folded part of one input: its ``field`` (a dict's item or an object's attribute), or the
        input itself; a missing field raises ``KeyError`` naming the accumulation and the field."""
        if self.field is None:
            return value
        if isinstance(value, dict):
            if self.field not in value:
                raise KeyError(f"{type(self).__name__}: input {value!r} has no field {self.field!r}")
            return value[self.field]
        try:
            return getattr(value, self.field)
        except AttributeError:
            raise KeyError(f"{type(self).__name__}: input {value!r} has no field {self.field!r}") from None


INTEGRAL_TYPES = {"tinyint", "smallint", "int", "bigint", "byte", "short", "integer", "long"}
FRACTIONAL_TYPES = {"float", "double"}


def is_numeric_type(ddl: str) -> bool:
    """Whether a Spark DDL type is a number (integral, fractional or decimal)."""
    return ddl in INTEGRAL_TYPES or ddl in FRACTIONAL_TYPES or ddl.startswith("decimal")


NUMERIC_TAKES = "numbers (tinyint, smallint, int, bigint, float, double, decimal)"


def numeric_refusal(ddl: str) -> Optional[str]:
    """``input_type_refusal`` of accumulations that take numbers."""
    return None if is_numeric_type(ddl) else f"it takes {NUMERIC_TAKES}"


def orderable_refusal(ddl: str) -> Optional[str]:
    """Values Python orders: not structs, maps or arrays (rows and dicts do not compare)."""
    return ("it takes values that can be ordered (numbers, strings, dates, timestamps, booleans)"
            if ddl.startswith(("struct", "map", "array")) else None)


def sum_type(ddl: str) -> Optional[str]:
    """Python sums integers exactly and floats as doubles."""
    if ddl in INTEGRAL_TYPES:
        return "bigint"
    if ddl in FRACTIONAL_TYPES or ddl.startswith("decimal"):
        return "double"
    return None
