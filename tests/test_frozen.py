"""`quick_init` constructs exactly what the dataclass's own `__init__` constructs."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest

from situated.conditions import ConditionResult
from situated.frozen import quick_init
from situated.recall.briefing import (
    Claim,
    GuidanceItem,
    Reconstruction,
    Rejected,
    RejectionReason,
    Scores,
    StageTrace,
    Verdict,
)
from situated.recall.reconstruct.base import ReconstructionInput
from situated.recall.reconstruct.prechecks import Evaluated


def _pair() -> tuple[type, type]:
    def make() -> type:
        @dataclass(frozen=True, slots=True)
        class Item:
            name: str
            size: int = 3
            tags: list[str] = field(default_factory=list)
            note: str | None = None

        return Item

    return make(), quick_init(make())


def test_same_fields_defaults_and_factories() -> None:
    plain, quick = _pair()
    for args, kwargs in [(("a",), {}), (("a", 5), {}), (("a",), {"note": "n", "tags": ["x"]}),
                         ((), {"name": "b", "size": 0}), (("a", 1, ["t"], None), {})]:
        p, q = plain(*args, **kwargs), quick(*args, **kwargs)
        assert dataclasses.astuple(p) == dataclasses.astuple(q)
        assert repr(p).split("(", 1)[1] == repr(q).split("(", 1)[1]
    a, b = quick("a"), quick("a")
    assert a.tags == [] and a.tags is not b.tags  # a fresh default per instance
    assert a == b and a != quick("a", 4)
    assert hash(Scores(0.5)) == hash(Scores(0.5)) and Scores(0.5) != Scores(0.6)


def test_wrong_calls_fail_as_before() -> None:
    plain, quick = _pair()
    for args, kwargs in [((), {}), (("a", 1, [], None, "extra"), {}), (("a",), {"nope": 1}),
                         (("a",), {"name": "b"})]:
        with pytest.raises(TypeError):
            plain(*args, **kwargs)
        with pytest.raises(TypeError):
            quick(*args, **kwargs)


def test_still_frozen_and_replace_copy_pickle_work() -> None:
    s = Scores(0.5, 0.4, expected_utility=0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.trust = 1.0  # type: ignore[misc]
    assert dataclasses.replace(s, trust=0.9) == Scores(0.5, 0.4, 0.9, 0.0, 0.1)
    r = Reconstruction("m", Verdict.PARTIAL, 0.5, "g", transferable=(Claim("g"),),
                       reason=RejectionReason.CONTRADICTED)
    assert pickle.loads(pickle.dumps(r)) == r
    assert copy.deepcopy(r) == r
    assert r.provenance == {} and Reconstruction("m", Verdict.PARTIAL, 0.5, "g").provenance \
        is not r.provenance


@pytest.mark.parametrize(
    "cls", [Scores, Claim, Reconstruction, GuidanceItem, Rejected, StageTrace,
            ReconstructionInput, Evaluated, ConditionResult],
)
def test_the_recall_types_use_it(cls: type) -> None:
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
    assert "_set_" in cls.__init__.__code__.co_names[0]


def test_refuses_what_it_cannot_copy() -> None:
    @dataclass
    class Mutable:
        x: int

    @dataclass(frozen=True)
    class NoSlots:
        x: int

    @dataclass(frozen=True, slots=True)
    class Posted:
        x: int

        def __post_init__(self) -> None:
            pass

    for cls in (Mutable, NoSlots, Posted):
        with pytest.raises(TypeError):
            quick_init(cls)
