"""The typed records situated stores: a memory with its origin, scope, validity and lifecycle.

Inputs are pydantic models, validated at the boundary; `validate_input` turns pydantic's report
into one `InvalidInput` naming the first offending field, so bad input never reaches the store.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum, StrEnum
from functools import lru_cache
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_serializer,
    field_validator,
)

from situated.defaults import OPEN_END as OPEN_END
from situated.errors import InvalidInput
from situated.names import MAX_NAME_CHARS as MAX_NAME_CHARS
from situated.names import canonical_actor, canonical_name

FactValue = str | int | float | bool | None
"""A state fact is flat: a scalar, never a nested structure."""

MAX_CONTENT_CHARS = 8000
MAX_STATE_CHARS = 8000
MAX_FACTS = 200


class Kind(StrEnum):
    """What sort of knowledge a memory holds."""

    LESSON = "lesson"
    FACT = "fact"
    PREFERENCE = "preference"
    NOTE = "note"


class Authority(IntEnum):
    """How a memory is known, weakest first. Recalled memory never raises authority."""

    INFERRED = 0
    USER_DECLARED = 1
    SYSTEM_OBSERVED = 2
    EXTERNALLY_VERIFIED = 3

    @property
    def label(self) -> str:
        return self.name.lower()


class Classification(IntEnum):
    """Sensitivity levels; a principal sees memories at or below its clearance."""

    PUBLIC = 0
    INTERNAL = 1
    CONFIDENTIAL = 2
    RESTRICTED = 3

    @property
    def label(self) -> str:
        return self.name.lower()


class LifecycleState(StrEnum):
    """Where a memory is in its life. Nothing is deleted by learning."""

    PROPOSED = "PROPOSED"
    ACTIVE = "ACTIVE"
    LOW_VALUE = "LOW_VALUE"
    ARCHIVED = "ARCHIVED"
    INVALIDATED = "INVALIDATED"
    REJECTED = "REJECTED"
    REVOKED = "REVOKED"
    ERASED = "ERASED"


RECALLABLE_STATES: tuple[LifecycleState, ...] = (
    LifecycleState.ACTIVE,
    LifecycleState.LOW_VALUE,
    LifecycleState.INVALIDATED,  # only while its validity window holds `as_of`
)
"""States a recall may see. An invalidated fact has a closed validity window, so it returns
only for `as_of` queries into the time it was valid."""


def _parse_enum(enum_cls: type[Any], value: Any, field: str) -> Any:
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        key = value.strip()
        for member in enum_cls:
            if key.lower() in (member.name.lower(), str(member.value).lower()):
                return member
    allowed = ", ".join(m.name.lower() for m in enum_cls)
    raise ValueError(f"{value!r:.40} is not one of: {allowed}")


MIN_TIME = -62135596800.0
"""0001-01-01T00:00:00Z as epoch seconds: the earliest time a `datetime` can show."""


def to_epoch(value: datetime | float | int | str | None, field: str) -> float | None:
    """Convert a time given as datetime, ISO string or epoch seconds to epoch seconds (UTC),
    from year 1 to the end of year 9999 (`MIN_TIME` .. `OPEN_END`)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidInput(field, "expected a time, got a boolean")
    if isinstance(value, int | float):
        if not MIN_TIME <= value <= OPEN_END:  # also NaN, infinities and ints too big to float
            raise InvalidInput(field, "time must be epoch seconds within years 1 to 9999")
        return float(value)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value[:64].replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(field, f"not an ISO-8601 time: {value!r:.40}") from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        try:
            ts = value.timestamp()
        except (OverflowError, ValueError):
            ts = math.nan
        if not MIN_TIME <= ts <= OPEN_END:
            raise InvalidInput(field, "time must be within years 1 to 9999 (UTC)")
        return ts
    raise InvalidInput(
        field, f"expected a datetime, ISO string or epoch seconds, got {type(value).__name__}"
    )


def from_epoch(ts: float) -> datetime:
    """Epoch seconds to an aware UTC datetime."""
    return datetime.fromtimestamp(ts, tz=UTC)


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_unicode(value: str, what: str) -> str:
    """`value`, unless it holds an unpaired surrogate: text that is not valid Unicode (such as
    a file name `os.fsdecode` could not decode), which cannot be stored, indexed or hashed."""
    if _SURROGATE.search(value):
        raise ValueError(
            f"{what} holds an unpaired surrogate (text that is not valid Unicode, e.g. an "
            "undecodable file name): decode or replace it first"
        )
    return value


def _check_name(value: str, what: str, actor: bool = False) -> str:
    """`value` under the name rule of `situated.names`; a ValueError for pydantic to place."""
    try:
        return (canonical_actor if actor else canonical_name)(value, what)
    except InvalidInput as exc:
        raise ValueError(exc.message) from None


MAX_ROLES = 100


def _role_set(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        value = [value]
    if isinstance(value, bytes | bytearray | Mapping):
        raise ValueError("roles must be a role name or a collection of role names")
    try:
        items = list(value)
    except TypeError:
        raise ValueError("roles must be a role name or a collection of role names") from None
    if len(items) > MAX_ROLES:
        raise ValueError(f"more than {MAX_ROLES} roles")
    if not all(isinstance(r, str) for r in items):
        raise ValueError("each role must be a string")
    roles = set()
    for r in items:
        try:
            roles.add(canonical_name(str(r), "role"))
        except InvalidInput as exc:
            raise ValueError(f"role {r!r} {exc.message}") from None
    return frozenset(roles)


def _level(value: Any) -> Classification:
    level: Classification = _parse_enum(Classification, value, "classification")
    return level


Name = Annotated[str, Strict(), AfterValidator(lambda v: _check_name(v, "name"))]
"""A tenant or namespace name, in NFKC form (the rule of `situated.names.canonical_name`)."""
ActorName = Annotated[str, Strict(), AfterValidator(lambda v: _check_name(v, "name", actor=True))]
"""Who acts, in NFKC form (`situated.names.canonical_actor`: single inner spaces allowed)."""
RoleSet = Annotated[frozenset[str], BeforeValidator(_role_set)]
"""Role names, given as one name or a collection, each under the rule of `Name`."""
Level = Annotated[Classification, BeforeValidator(_level)]
"""A classification, given as the enum, its name or its value."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=False)


class State(_Frozen):
    """A situation: free text plus optional flat facts.

    Args:
        text: what the situation looked like, in words.
        facts: a flat mapping of named observations, e.g. `{"room": "kitchen", "price": 42}`.
    """

    text: str = ""
    facts: dict[str, FactValue] = Field(default_factory=dict)

    def __init__(self, text: str = "", facts: Mapping[str, FactValue] | None = None, **kw: Any):
        try:
            super().__init__(  # type: ignore[call-arg]
                text=text, facts={} if facts is None else facts, **kw  # checked: `_facts`
            )
        except ValidationError as exc:
            raise _as_invalid("state", exc) from None

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        if len(v) > MAX_STATE_CHARS:
            raise ValueError(f"longer than {MAX_STATE_CHARS} characters")
        return check_unicode(v, "text")

    @field_validator("facts", mode="before")
    @classmethod
    def _facts(cls, v: Any) -> Any:
        if not isinstance(v, Mapping):
            raise ValueError("facts must be a flat mapping of name -> scalar")
        if len(v) > MAX_FACTS:
            raise ValueError(f"more than {MAX_FACTS} facts")
        for key, val in v.items():
            if not isinstance(key, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,99}\Z", key):
                raise ValueError(
                    f"fact name {key!r:.40} must be an identifier (letters, digits, _.-)"
                )
            if val is not None and not isinstance(val, str | int | float | bool):
                raise ValueError(f"fact {key!r} must be a scalar, got {type(val).__name__}")
            if isinstance(val, float) and not math.isfinite(val):
                raise ValueError(f"fact {key!r} must be finite")
            if isinstance(val, int) and not -(2**63) <= val < 2**63:
                raise ValueError(f"fact {key!r} must fit in 64 bits")
            if isinstance(val, str):
                if len(val) > MAX_STATE_CHARS:
                    raise ValueError(f"fact {key!r} longer than {MAX_STATE_CHARS} characters")
                check_unicode(val, f"fact {key!r}")
        return dict(v)

    @property
    def is_empty(self) -> bool:
        return not self.text.strip() and not self.facts

    def describe(self) -> str:
        """Text and facts in one line, for embedding and display."""
        parts = [self.text.strip()] if self.text.strip() else []
        if self.facts:
            parts.append("; ".join(f"{k}={v}" for k, v in sorted(self.facts.items())))
        return " | ".join(parts)

    def fingerprint(self) -> str:
        """A stable hash of the state, stored with each recall for audit."""
        return _digest(self.describe())


STATE_FIELDS = frozenset({"text", "facts"})


def as_state(value: Any, field: str = "state") -> State:
    """A situation in any of its one shape's spellings: a `State`, its text alone, or the
    mapping `{"text": ..., "facts": {...}}` (either key may be left out), as every door takes
    it; anything else is an `InvalidInput` naming `field`."""
    if isinstance(value, State):
        return value
    if isinstance(value, str):
        return State(value)
    if isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in STATE_FIELDS)
        if unknown:
            raise InvalidInput(f"{field}.{unknown[0]:.40}", "unknown argument; accepted: text, "
                               "facts")
        text, facts = value.get("text", ""), value.get("facts")
        if not isinstance(text, str):
            raise InvalidInput(f"{field}.text", "must be text")
        try:
            return State(text, facts={} if facts is None else facts)
        except InvalidInput as exc:  # State names itself `state`
            raise InvalidInput(field + exc.field.removeprefix("state"), exc.message) from None
    raise InvalidInput(field, "must be a State, its text, or {\"text\": ..., \"facts\": {...}}")


class Outcome(_Frozen):
    """What happened when the action was taken in the source state."""

    success: bool | None = None
    reward: float | None = None

    @field_validator("reward")
    @classmethod
    def _reward(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("reward must be finite")
        return v


class Source(_Frozen):
    """Where a memory came from. `state=None` with `state_unknown=True` says so explicitly."""

    state: State | None = None
    state_unknown: bool = False
    action: str | None = None
    outcome: Outcome = Field(default_factory=Outcome)
    episode_id: str | None = None
    step: int | None = Field(default=None, ge=0)
    evidence: tuple[str, ...] = ()


class Scope(_Frozen):
    """Who may see a memory."""

    tenant: Name
    namespace: Name = "default"
    roles: RoleSet = frozenset()
    classification: Level = Classification.INTERNAL
    consent: str | None = None

    @field_serializer("classification")
    def _cls_label(self, v: Classification) -> str:
        return v.label

    @property
    def role_key(self) -> str:
        """The required roles in a canonical form (sorted, NUL-separated), for bound filters."""
        return role_key(self.roles)


def role_key(roles: frozenset[str] | set[str]) -> str:
    return "\x1f".join(sorted(roles))


class Validity(_Frozen):
    """World-time validity (`valid_from`, `valid_until`) and transaction time (`recorded_at`),
    as aware UTC datetimes; `valid_until` is None while the memory holds with no end. (Given
    as epoch seconds, a time is read as such: `OPEN_END` is no end.) The `*_ts` properties
    are the same times as epoch seconds, as the store keeps them."""

    valid_from: datetime
    valid_until: datetime | None = None
    recorded_at: datetime

    @field_validator("valid_from", "valid_until", "recorded_at", mode="before")
    @classmethod
    def _time(cls, v: Any) -> Any:
        if isinstance(v, int | float) and not isinstance(v, bool):
            return None if v >= OPEN_END else from_epoch(float(v))
        if isinstance(v, datetime) and v.tzinfo is None:
            return v.replace(tzinfo=UTC)
        return v

    @property
    def valid_from_ts(self) -> float:
        return self.valid_from.timestamp()

    @property
    def valid_until_ts(self) -> float:
        """`OPEN_END` when open-ended."""
        return OPEN_END if self.valid_until is None else self.valid_until.timestamp()

    @property
    def recorded_at_ts(self) -> float:
        return self.recorded_at.timestamp()

    @property
    def open_ended(self) -> bool:
        return self.valid_until is None


@dataclass(frozen=True)
class Counters:
    """Outcome counters, derived from the ledger."""

    uses: int = 0
    successes: int = 0
    failures: int = 0
    exposures: int = 0

    @property
    def utility(self) -> float:
        """Beta(1,1) posterior mean of the success rate when used: (succ + 1) / (use + 2)."""
        return (self.successes + 1) / (self.uses + 2)


class MemoryRecord(_Frozen):
    """A lesson or fact with its origin attached. Content is immutable once stored."""

    id: str
    content: str
    kind: Kind
    source: Source
    conditions: tuple[str, ...] = ()
    entity: str | None = None
    attribute: str | None = None
    value: FactValue = None
    multi_valued: bool = False
    scope: Scope
    authority: Authority
    validity: Validity
    state: LifecycleState
    counters: Counters = Field(default_factory=Counters)
    policy_version: str | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    fingerprint: str
    proposed_by: str

    @property
    def utility(self) -> float:
        return self.counters.utility

    @field_serializer("authority")
    def _authority_label(self, v: Authority) -> str:
        return v.label

    @field_validator("authority", mode="before")
    @classmethod
    def _authority(cls, v: Any) -> Any:
        return _parse_enum(Authority, v, "authority")


class Principal(_Frozen):
    """Who is asking: tenant, roles held and clearance.

    Args:
        tenant: the tenant whose memories may be read or written.
        roles: roles held; a memory that requires roles is visible only if all are held.
        clearance: the highest classification this principal may read.
        name: who acts, recorded as the actor of ledger events.

    Tenant and role names follow `situated.names.canonical_name` (NFKC; whitespace, control,
    format and invisible characters refused, never stripped; 1-100 characters), the actor's
    name `canonical_actor` (the same, with single spaces between words).
    """

    tenant: Name
    roles: RoleSet = frozenset()
    clearance: Level = Classification.INTERNAL
    name: ActorName = "agent"

    def __init__(
        self,
        tenant: str,
        roles: set[str] | frozenset[str] | list[str] | tuple[str, ...] | str = frozenset(),
        clearance: Classification | str = Classification.INTERNAL,
        name: str = "agent",
        **kw: Any,
    ):
        try:
            super().__init__(  # type: ignore[call-arg]
                tenant=tenant, roles=roles, clearance=clearance, name=name, **kw
            )
        except ValidationError as exc:
            raise _as_invalid("principal", exc) from None



def parse_authority(value: Authority | str) -> Authority:
    try:
        result: Authority = _parse_enum(Authority, value, "authority")
    except ValueError as exc:
        raise InvalidInput("authority", str(exc)) from None
    return result


def parse_kind(value: Kind | str) -> Kind:
    try:
        result: Kind = _parse_enum(Kind, value, "kind")
    except ValueError as exc:
        raise InvalidInput("kind", str(exc)) from None
    return result


T = TypeVar("T")


def validate_input(field_prefix: str, build: Callable[[], T]) -> T:
    """Run a pydantic constructor, re-raising its first error as `InvalidInput(field)`."""
    try:
        return build()
    except ValidationError as exc:
        raise _as_invalid(field_prefix, exc) from None


def _as_invalid(field_prefix: str, exc: ValidationError) -> InvalidInput:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
    field = f"{field_prefix}.{loc}" if loc and field_prefix else (loc or field_prefix)
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return InvalidInput(field, msg)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@lru_cache(maxsize=8192)
def normalise_text(text: str) -> str:
    """Lower-case, collapse whitespace and strip punctuation at the ends: the dedupe key."""
    return re.sub(r"\s+", " ", text.strip().lower()).strip(" .!;:,")


def content_fingerprint(tenant: str, namespace: str, kind: Kind, content: str) -> str:
    """The exact-duplicate key of a memory within its tenant and namespace."""
    return _digest("\x1f".join((tenant, namespace, kind.value, normalise_text(content))))


def utcnow() -> float:
    """Now, as epoch seconds."""
    return datetime.now(tz=UTC).timestamp()
