"""Metadata filters as the retriever frameworks write them, turned into an
edudb WHERE condition whose values are bound parameters (never spliced
into the statement).

Two spellings come in: the operator mapping that LangChain's vector stores
take (``{"company": "Boeing", "year": {"$gte": 2020}}``, with ``$and``,
``$or`` and ``$not``), here :func:`from_mapping`; and LlamaIndex's
``MetadataFilters``, translated in ``edudb.llama_index`` through
:class:`Condition`. A string is edudb's own condition, taken as written.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

from . import _edudb

Value = Union[str, int, float, bool, _dt.date, _dt.datetime]
"""A value a filter compares metadata with: text, a number, a boolean, or
a date (a ``datetime`` with its time zone)."""

Param = Union[str, int, float]
"""A bound parameter's value."""

Where = Tuple[str, Dict[str, Param]]
"""A compiled filter: the condition's text and the parameters it names."""

Filter = Union[str, Mapping[str, Any]]
"""What an adapter's ``filter`` takes: edudb's own condition
(``"meta.year >= 2020"``) or an operator mapping (:func:`from_mapping`)."""

KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
"""A metadata key edudb stores: a letter or ``_``, then letters, digits and
``_``, at most 64 bytes."""

PARAM_PREFIX = "edudb_filter_"
"""The parameters a filter binds are named this plus a number, so that they
stay clear of the statement's own."""


class Condition:
    """The parameters of a WHERE condition being written: each value it
    compares with is bound to one of them."""

    def __init__(self) -> None:
        self.params: Dict[str, Param] = {}

    def value(self, value: Value) -> str:
        """The condition's text for ``value``: a bound parameter, or
        ``true``/``false`` (which the language writes as words)."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, _dt.datetime):
            if value.tzinfo is None:
                raise ValueError(
                    f"a filter's time {value.isoformat()} has no time zone: edudb compares instants, give it one"
                )
            bound: Param = value.isoformat()
        elif isinstance(value, _dt.date):
            bound = value.isoformat()
        elif isinstance(value, (str, int, float)):
            bound = value
        else:
            raise ValueError(
                f"a filter compares metadata with text, numbers, booleans or dates, not {type(value).__name__} ({value!r})"
            )
        name = f"{PARAM_PREFIX}{len(self.params)}"
        self.params[name] = bound
        return f"${name}"

    def values(self, values: Any, operator: str) -> List[str]:
        """The texts of a list of values (for ``IN``), at least one."""
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"{operator} takes a non-empty list of values, got {values!r}")
        return [self.value(v) for v in values]

    @staticmethod
    def key(key: Any) -> str:
        """``meta.KEY`` for a valid metadata key."""
        if not isinstance(key, str) or not KEY.match(key):
            raise ValueError(
                f"{key!r} is not a metadata key: a letter or '_', then letters, digits and '_' (at most 64)"
            )
        return f"meta.{key}"


def join(parts: List[str], word: str) -> str:
    """``parts`` joined by ``AND`` or ``OR``, each in parentheses."""
    if not parts:
        raise ValueError(f"{word} of no conditions")
    return parts[0] if len(parts) == 1 else f" {word} ".join(f"({p})" for p in parts)


# The comparisons of the operator mapping, as edudb writes them.
COMPARISONS = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def from_mapping(mapping: Mapping[str, Any], condition: Condition) -> str:
    """The condition an operator mapping writes, as LangChain's vector
    stores take it (Chroma's and PGVector's ``filter``):

    - ``{"key": value}`` is ``$eq``; several keys must all hold;
    - ``{"key": {"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte": value}}``;
    - ``{"key": {"$in" | "$nin": [values]}}``, ``{"key": {"$between": [a, b]}}``;
    - ``{"key": {"$contains": text}}`` (a list holding it);
    - ``{"key": {"$exists": true | false}}``;
    - ``{"$and": [mappings]}``, ``{"$or": [mappings]}``, ``{"$not": mapping}``.

    edudb's semantics hold: a value compares with values of its own type,
    ``$ne`` needs the key, ``$nin`` and ``$not`` hold without it."""
    if not isinstance(mapping, Mapping) or not mapping:
        raise ValueError(f"a filter is a non-empty mapping of keys to conditions, got {mapping!r}")
    parts = []
    for key, test in mapping.items():
        if key in ("$and", "$or"):
            if isinstance(test, (str, bytes)) or not isinstance(test, Sequence):
                raise ValueError(f"{key} takes a list of filters, got {test!r}")
            parts.append(join([from_mapping(each, condition) for each in test], key[1:].upper()))
        elif key == "$not":
            parts.append(f"NOT ({from_mapping(test, condition)})")
        elif isinstance(key, str) and key.startswith("$"):
            raise ValueError(f"unknown filter operator {key!r} (known: $and, $or, $not)")
        elif isinstance(test, Mapping):
            if not test:
                raise ValueError(f"the filter on {key!r} is empty")
            parts.append(join([comparison(key, op, operand, condition) for op, operand in test.items()], "AND"))
        else:
            parts.append(comparison(key, "$eq", test, condition))
    return join(parts, "AND")


def comparison(key: str, operator: str, operand: Any, condition: Condition) -> str:
    """One key's comparison with ``operator`` (one of the mapping's
    ``$``-operators)."""
    field = Condition.key(key)
    if operator in COMPARISONS:
        return f"{field} {COMPARISONS[operator]} {condition.value(operand)}"
    if operator in ("$in", "$nin"):
        listed = f"{field} IN ({', '.join(condition.values(operand, operator))})"
        return listed if operator == "$in" else f"NOT {listed}"
    if operator == "$between":
        low, high = between(operand)
        return f"{field} BETWEEN {condition.value(low)} AND {condition.value(high)}"
    if operator == "$contains":
        if not isinstance(operand, str):
            raise ValueError(f"$contains takes the text a list must hold, got {operand!r}")
        return f"{field} CONTAINS {condition.value(operand)}"
    if operator == "$exists":
        if not isinstance(operand, bool):
            raise ValueError(f"$exists takes true or false, got {operand!r}")
        return f"EXISTS {field}" if operand else f"NOT EXISTS {field}"
    raise ValueError(
        f"unknown filter operator {operator!r} on {key!r} "
        f"(known: {', '.join([*COMPARISONS, '$in', '$nin', '$between', '$contains', '$exists'])})"
    )


def between(operand: Any) -> Tuple[Value, Value]:
    """The two ends of a ``$between``."""
    if isinstance(operand, (str, bytes)) or not isinstance(operand, Sequence) or len(operand) != 2:
        raise ValueError(f"$between takes [low, high], got {operand!r}")
    return operand[0], operand[1]


def with_where(statement: str, condition: str) -> str:
    """``statement`` with ``WHERE condition`` added as a clause of its own,
    on lines of its own, so that a comment at the statement's end cannot
    swallow it; a statement's closing ``;`` (and whatever comment follows
    it) is dropped first. A statement that has a WHERE already is refused
    by the query language ("WHERE is given twice"): write the condition
    into it instead."""
    return f"{statement[: statement_end(statement)]}\nWHERE (\n{condition}\n)"


def statement_end(statement: str) -> int:
    """Where ``statement``'s closing ``;`` is (outside its strings and
    comments, with only comments and blanks after it), or its length when
    it has none (so a second statement after a ``;`` stays, and is
    refused)."""
    at, in_string = 0, False
    while at < len(statement):
        char = statement[at]
        if in_string:
            if char == "'":
                # A doubled quote writes a quote inside the string.
                in_string = statement[at + 1 : at + 2] == "'"
                at += 1 if in_string else 0
        elif char == "'":
            in_string = True
        elif statement.startswith("--", at):
            newline = statement.find("\n", at)
            at = len(statement) if newline < 0 else newline
        elif char == ";":
            return at if _only_comments(statement[at + 1 :]) else len(statement)
        at += 1
    return len(statement)


def _only_comments(text: str) -> bool:
    """Whether ``text`` holds nothing but blanks and ``--`` comments."""
    return all(not line.strip() or line.strip().startswith("--") for line in text.splitlines())


def compile_filter(given: Filter) -> Where:
    """The condition text and its parameters for an adapter's ``filter``:
    edudb's own condition as written, or an operator mapping."""
    if isinstance(given, str):
        if not given.strip():
            raise ValueError("the filter is empty")
        # Parsed alone first: a condition that would end its clause (a
        # stray `)`, a clause after it) is refused at its own line and
        # column, never spliced.
        _edudb.check_condition(given)
        return given, {}
    condition = Condition()
    return from_mapping(given, condition), condition.params
