"""The PartiQL statements of a batch, made from the very expressions the single-item calls send.

A batch (batched.py) sends `BatchExecuteStatement`, which speaks PartiQL, not UpdateItem's
expressions. Rather than write the state machine's rules a second time, this module translates
the update and condition that request.py, fenced_writes.py and expressions.py build: a `#name`
becomes its quoted attribute, a `:value` a `?` with the value as the next parameter. So a rule
changed there (who may take a record over, what a completion writes) changes here with it.

Three things PartiQL spells differently, each handled once:
- `ADD #n :v` (a counter that starts from nothing) is `SET n = if_not_exists(n, 0) + v`;
- `REMOVE a, b` is `REMOVE a REMOVE b` (DynamoDB rejects the comma in PartiQL);
- UPDATE never creates an item, so `attribute_not_exists(#id) OR ...` in an acquire's condition
  (the branch that lets UpdateItem create one) is dropped: a missing item refuses the UPDATE
  with no item, and the batch sends an INSERT for it instead.

Reserved words (status, error, result, owner) are why every attribute is double-quoted.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, cast

from exactly_once.stores import schema
from exactly_once.stores.dynamodb.expressions import NAMES, n, s
from exactly_once.stores.records import Item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import BatchStatementRequestTypeDef

_TOKEN = re.compile(r"#[A-Za-z_]\w*|:[A-Za-z_]\w*")
_CLAUSE = re.compile(r"\b(SET|ADD|REMOVE)\b")
_CREATES = "attribute_not_exists(#id) OR "


class Statement:
    """One statement of a batch and what it is, so its answer can be read. A plain class: a
    frozen dataclass compiles six generated methods at every cold start (~0.8 ms), and nothing
    compares, hashes or copies these."""

    __slots__ = ("insert", "parameters", "record_id", "text")

    def __init__(
        self,
        record_id: str,
        text: str,
        parameters: list[dict[str, Any]],
        insert: bool,  # an INSERT (a new key) rather than a conditional UPDATE
    ) -> None:
        self.record_id = record_id
        self.text = text
        self.parameters = parameters
        self.insert = insert

    def request(self) -> BatchStatementRequestTypeDef:
        """The BatchStatementRequest: a refusal brings back the old item, as ALL_OLD does for
        UpdateItem (an INSERT's DuplicateItem never carries one)."""
        request = {
            "Statement": self.text,
            "Parameters": self.parameters,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        return cast("BatchStatementRequestTypeDef", request)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _translate(expression: str, values: dict[str, Any], parameters: list[dict[str, Any]]) -> str:
    """The expression in PartiQL; the values it uses are appended to `parameters` in order."""

    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith("#"):
            return _quoted(NAMES[token])
        parameters.append(values[token])
        return "?"

    return _TOKEN.sub(one, expression)


def _clauses(update: str) -> dict[str, list[str]]:
    """An update expression's SET, ADD and REMOVE actions, each split at its top-level commas."""
    parts = _CLAUSE.split(update)
    clauses: dict[str, list[str]] = {"SET": [], "ADD": [], "REMOVE": []}
    for keyword, body in zip(parts[1::2], parts[2::2], strict=True):
        clauses[keyword] += [a.strip() for a in _top_level_commas(body) if a.strip()]
    return clauses


def _top_level_commas(body: str) -> list[str]:
    """Split at commas outside parentheses (`if_not_exists(#crt, :now_ms)` stays whole)."""
    pieces, depth, start = [], 0, 0
    for i, char in enumerate(body):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            pieces.append(body[start:i])
            start = i + 1
    pieces.append(body[start:])
    return pieces


def update(
    table: str,
    record_id: str,
    update_expression: str,
    condition: str,
    values: dict[str, Any],
    *,
    returning: bool = False,
) -> Statement:
    """The conditional UPDATE that does what UpdateItem with these expressions does to an item
    that exists; with `returning`, its success brings back the old item (RETURNING ALL OLD *),
    which an acquire reads its fence and attempt from."""
    clauses = _clauses(update_expression)
    values = dict(values)
    sets = list(clauses["SET"])
    for action in clauses["ADD"]:  # a number counted up from nothing, as ADD does
        placeholder, amount = action.split()
        values[":_zero"] = n(0)
        sets.append(f"{placeholder} = if_not_exists({placeholder}, :_zero) + {amount}")
    condition = condition.removeprefix(_CREATES)
    parameters: list[dict[str, Any]] = []
    text = f"UPDATE {_quoted(table)}"
    if sets:
        text += " SET " + _translate(", ".join(sets), values, parameters)
    for removed in clauses["REMOVE"]:
        text += " REMOVE " + _translate(removed, values, parameters)
    text += f" WHERE {_quoted(schema.PARTITION_KEY)} = ?"
    parameters.append(s(record_id))
    text += " AND (" + _translate(condition, values, parameters) + ")"
    if returning:
        text += " RETURNING ALL OLD *"
    return Statement(record_id, text, parameters, insert=False)


def insert(table: str, item: Item) -> Statement:
    """The INSERT of a whole new item; it fails with DuplicateItem when the key exists."""
    fields = ", ".join("'" + name.replace("'", "''") + "': ?" for name in item)
    text = f"INSERT INTO {_quoted(table)} VALUE {{{fields}}}"
    return Statement(item[schema.PARTITION_KEY]["S"], text, list(item.values()), insert=True)
