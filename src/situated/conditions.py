"""Applicability conditions: small predicates over state facts, parsed safely, never eval'd.

Grammar (a subset of Python expression syntax, parsed with `ast` and walked by hand):

    condition := operand OP operand | exists(name) | not exists(name)
    OP        := == | != | < | <= | > | >= | in | not in
    operand   := fact name | number | 'string' | true | false | null | [literal, ...]

A bare name on either side is a fact of the present state (`price <= budget` compares two
facts). Evaluation is three-valued: a condition whose fact is absent is UNKNOWN, never false,
so a missing fact leads to "gather evidence", not to a rejection.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

from situated.errors import ConditionSyntaxError
from situated.frozen import quick_init
from situated.models import FactValue, check_unicode

MAX_CONDITION_CHARS = 500
_LITERAL_NAMES: dict[str, FactValue] = {
    "true": True,
    "True": True,
    "false": False,
    "False": False,
    "null": None,
    "None": None,
}
_OPS: dict[type[ast.cmpop], str] = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "not in",
}


class Truth(StrEnum):
    """The value of a condition on a state."""

    MATCHED = "matched"
    MISMATCHED = "mismatched"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Fact:
    """An operand naming a fact of the present state."""

    name: str


Scalar = str | int | float | bool | None
Operand = Fact | Scalar | tuple[Scalar, ...]
"""A side of a condition: a fact, a literal, or a list of literals (for `in`)."""


@dataclass(frozen=True)
class Condition:
    """A parsed condition. `left`/`right` are `Fact` or literal values."""

    text: str
    op: str
    left: Operand
    right: Operand = None

    @property
    def facts(self) -> tuple[str, ...]:
        """Names of the facts this condition reads."""
        left, right = self.left, self.right
        if isinstance(left, Fact):
            return (left.name, right.name) if isinstance(right, Fact) else (left.name,)
        return (right.name,) if isinstance(right, Fact) else ()


@quick_init
@dataclass(frozen=True, slots=True)
class ConditionResult:
    """A condition evaluated against one state."""

    condition: Condition
    truth: Truth
    missing: tuple[str, ...] = ()
    detail: str = ""


def parse_condition(text: str) -> Condition:
    """Parse one condition string, raising `ConditionSyntaxError` naming what is wrong.

    Cached: memories are immutable, so their conditions are parsed once per process."""
    if not isinstance(text, str) or not text.strip():  # before the cache: it hashes `text`
        raise ConditionSyntaxError("conditions", "a condition must be a non-empty string")
    return _parse(text)


def clear_parse_cache() -> None:
    """Forget the parsed conditions (they hold memory text: erasure empties the cache)."""
    _parse.cache_clear()


@lru_cache(maxsize=4096)
def _parse(text: str) -> Condition:
    src = text.strip()
    if len(src) > MAX_CONDITION_CHARS:
        raise ConditionSyntaxError("conditions", f"longer than {MAX_CONDITION_CHARS} characters")
    try:
        check_unicode(src, "a condition")
    except ValueError as exc:
        raise ConditionSyntaxError("conditions", str(exc)) from None
    if "\x00" in src:
        raise ConditionSyntaxError("conditions", "a condition may not hold a NUL character")
    try:
        tree = ast.parse(src, mode="eval").body
    except SyntaxError as exc:
        raise ConditionSyntaxError("conditions", f"cannot parse {src!r}: {exc.msg}") from None
    negated = False
    if isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.Not):
        negated, tree = True, tree.operand
    if isinstance(tree, ast.Call):
        if not (isinstance(tree.func, ast.Name) and tree.func.id == "exists"):
            raise ConditionSyntaxError("conditions", f"only exists(name) may be called: {src!r}")
        if len(tree.args) != 1 or not isinstance(tree.args[0], ast.Name) or tree.keywords:
            raise ConditionSyntaxError("conditions", f"exists takes one fact name: {src!r}")
        return Condition(src, "not exists" if negated else "exists", Fact(tree.args[0].id))
    if negated:
        raise ConditionSyntaxError("conditions", f"'not' applies only to exists(): {src!r}")
    if not isinstance(tree, ast.Compare) or len(tree.ops) != 1:
        raise ConditionSyntaxError(
            "conditions", f"expected '<fact> <op> <value>' with one operator: {src!r}"
        )
    op = _OPS.get(type(tree.ops[0]))
    if op is None:
        raise ConditionSyntaxError("conditions", f"unsupported operator in {src!r}")
    left = _operand(tree.left, src)
    right = _operand(tree.comparators[0], src)
    if not isinstance(left, Fact) and not isinstance(right, Fact):
        raise ConditionSyntaxError("conditions", f"a condition must name a fact: {src!r}")
    if op in ("in", "not in") and not isinstance(right, tuple | Fact):
        raise ConditionSyntaxError("conditions", f"'{op}' needs a list on the right: {src!r}")
    return Condition(src, op, left, right)


def _operand(node: ast.expr, src: str) -> Any:
    if isinstance(node, ast.Name):
        if node.id in _LITERAL_NAMES:
            return _LITERAL_NAMES[node.id]
        return Fact(node.id)
    if isinstance(node, ast.Attribute):
        # dotted fact names such as `order.total`
        parts: list[str] = []
        cur: ast.expr = node
        while isinstance(cur, ast.Attribute):
            parts.append(cur.attr)
            cur = cur.value
        if isinstance(cur, ast.Name):
            return Fact(".".join([cur.id, *reversed(parts)]))
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float | bool):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int | float)
    ):
        return -node.operand.value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [_operand(e, src) for e in node.elts]
        if any(isinstance(i, Fact | tuple) for i in items):
            raise ConditionSyntaxError("conditions", f"list items must be literals: {src!r}")
        return tuple(items)
    raise ConditionSyntaxError("conditions", f"unsupported operand in {src!r}")


def evaluate(cond: Condition, facts: Mapping[str, FactValue]) -> ConditionResult:
    """Evaluate a condition on facts: MATCHED, MISMATCHED, or UNKNOWN when a fact is absent."""
    if cond.op in ("exists", "not exists"):
        name = cond.facts[0]  # exists() takes one fact
        present = name in facts and facts[name] is not None
        ok = present if cond.op == "exists" else not present
        return ConditionResult(cond, Truth.MATCHED if ok else Truth.MISMATCHED)
    names = cond.facts
    missing = tuple([n for n in names if n not in facts]) if names else ()
    if missing:
        return ConditionResult(cond, Truth.UNKNOWN, missing, f"fact {missing[0]!r} is absent")
    left = _resolve(cond.left, facts)
    right = _resolve(cond.right, facts)
    try:
        ok = _compare(cond.op, left, right)
    except TypeError:
        return ConditionResult(
            cond, Truth.MISMATCHED, (), f"cannot compare {left!r} {cond.op} {right!r}"
        )
    detail = f"{_show(cond.left, left)} {cond.op} {_show(cond.right, right)}"
    return ConditionResult(cond, Truth.MATCHED if ok else Truth.MISMATCHED, (), detail)


def _resolve(operand: Any, facts: Mapping[str, FactValue]) -> Any:
    return facts[operand.name] if isinstance(operand, Fact) else operand


def _show(operand: Any, value: Any) -> str:
    return f"{operand.name}={value!r}" if isinstance(operand, Fact) else repr(value)


def _norm(v: Any) -> Any:
    return v.strip().lower() if isinstance(v, str) else v


def _compare(op: str, left: Any, right: Any) -> bool:
    if op in ("in", "not in"):
        seq = right if isinstance(right, tuple | list) else (right,)
        hit = _norm(left) in [_norm(x) for x in seq]
        return hit if op == "in" else not hit
    a, b = _norm(left), _norm(right)
    if op in ("<", "<=", ">", ">="):
        if isinstance(a, bool) or isinstance(b, bool):
            raise TypeError("ordering on booleans")
        if isinstance(a, str) != isinstance(b, str):
            raise TypeError("ordering between text and number")
    if op == "==":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)
