from __future__ import annotations

import pytest

from situated.conditions import Truth, evaluate, parse_condition
from situated.errors import ConditionSyntaxError

FACTS = {
    "plan": "annual", "days": 12, "price": 42.5, "budget": 50, "visible": False, "room": "Kitchen"
}


@pytest.mark.parametrize(
    ("text", "truth"),
    [
        ("plan == 'annual'", Truth.MATCHED),
        ("plan == 'monthly'", Truth.MISMATCHED),
        ("plan != 'monthly'", Truth.MATCHED),
        ("days < 14", Truth.MATCHED),
        ("days < 12", Truth.MISMATCHED),
        ("days <= 12", Truth.MATCHED),
        ("days > 30", Truth.MISMATCHED),
        ("days >= 12", Truth.MATCHED),
        ("price <= budget", Truth.MATCHED),
        ("budget < price", Truth.MISMATCHED),
        ("room in ['kitchen', 'hall']", Truth.MATCHED),
        ("room not in ['kitchen', 'hall']", Truth.MISMATCHED),
        ("visible == false", Truth.MATCHED),
        ("visible == true", Truth.MISMATCHED),
        ("exists(plan)", Truth.MATCHED),
        ("exists(coupon)", Truth.MISMATCHED),
        ("not exists(coupon)", Truth.MATCHED),
        ("days > -1", Truth.MATCHED),
    ],
)
def test_operators(text: str, truth: Truth) -> None:
    assert evaluate(parse_condition(text), FACTS).truth is truth


def test_absent_fact_is_unknown_never_false() -> None:
    result = evaluate(parse_condition("coupon_code == 'X'"), FACTS)
    assert result.truth is Truth.UNKNOWN
    assert result.missing == ("coupon_code",)


def test_type_confusion_is_a_mismatch_not_a_crash() -> None:
    assert evaluate(parse_condition("plan > 3"), FACTS).truth is Truth.MISMATCHED


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('echo pwned')",
        "plan == 'a' or 1 == 1",
        "days < 3 < 5",
        "f(plan)",
        "plan ==",
        "",
        "1 == 1",
        "plan.__class__ == 1 and x",
        "lambda: 1",
    ],
)
def test_unsafe_or_malformed_conditions_are_refused(text: str) -> None:
    with pytest.raises(ConditionSyntaxError) as err:
        parse_condition(text)
    assert err.value.field == "conditions"
