"""Scenarios as data: the JSON (or YAML) format, its validation, and loading.

A scenario file is an object with a `format` tag and a list of `scenarios`:

    {"format": "situated-eval/1",
     "scenarios": [
       {"id": "household-heat-01", "domain": "household", "slice": "in_distribution",
        "principal": {"tenant": "home-1", "roles": [], "clearance": "internal"},
        "intent": "heat the mug of coffee",
        "present": {"text": "...", "facts": {"microwave_working": false}},
        "policy": {"version": null, "allowed_tools": null, "prohibited_effects": []},
        "options": ["heat it in the microwave", "heat it in a pan on the stove"],
        "answer": "heat it in a pan on the stove",
        "memories": [
          {"key": "applicable", "content": "...", "state": {"text": "...", "facts": {}},
           "conditions": ["microwave_working == false"], "applies": true},
          {"key": "twin", "content": "...", "state": {...}, "applies": false, "tags": ["twin"]}
        ]}]}

Every memory carries its ground truth: `applies` (should it be served as guidance in the
present state?) and `effect` (what following it does to the task: `helps`, `misleads`,
`neutral`; by default `helps` when it applies and `misleads` when it does not). Times
(`valid_from`, `valid_until`) are days relative to the moment the scenario runs, so a file
never goes stale. Errors name the file and the field: `quick.json: scenarios[3].memories[1].
applies: Field required`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from situated.errors import InvalidInput
from situated.models import Classification, FactValue, State

FORMAT = "situated-eval/1"

SLICES: tuple[str, ...] = (
    "in_distribution",
    "ood_state",
    "superseded_fact",
    "superseded_policy",
    "contradictory_evidence",
    "poisoned",
    "missing_source_state",
    "revoked_consent",
    "foreign_scope",
    "distractors",
)
"""The slices the shipped scenarios cover, in report order. Files may add their own."""

Effect = Literal["helps", "misleads", "neutral"]


class ScenarioError(InvalidInput):
    """A scenario file is unreadable or invalid; `field` names the file and the field."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StateSpec(_Model):
    """A situation: text plus flat facts (as `situated.State`)."""

    text: str = ""
    facts: dict[str, FactValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _valid_state(self) -> StateSpec:
        try:
            State(self.text, facts=self.facts)
        except ValidationError as exc:
            raise ValueError(str(exc.errors()[0].get("msg", "invalid state"))) from None
        return self

    def to_state(self) -> State:
        return State(self.text, facts=self.facts)

    def describe(self) -> str:
        return self.to_state().describe()


class PrincipalSpec(_Model):
    """Who asks in the scenario."""

    tenant: str
    roles: tuple[str, ...] = ()
    clearance: str = "internal"

    @field_validator("clearance")
    @classmethod
    def _clearance(cls, v: str) -> str:
        _classification(v)
        return v

    @property
    def level(self) -> Classification:
        return _classification(self.clearance)


class PolicySpec(_Model):
    """The rules of the present run (as `situated.Policy`)."""

    version: str | None = None
    allowed_tools: tuple[str, ...] | None = None
    prohibited_effects: tuple[str, ...] = ()


class TrackRecord(_Model):
    """How a memory fared before the scenario: uses and successes when used."""

    uses: int = Field(default=0, ge=0)
    successes: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _not_more_successes(self) -> TrackRecord:
        if self.successes > self.uses:
            raise ValueError("successes cannot exceed uses")
        return self

    @property
    def utility(self) -> float:
        """Beta(1,1) posterior mean, the same formula situated uses."""
        return (self.successes + 1) / (self.uses + 2)


class MemorySpec(_Model):
    """One memory the store holds before the task, with its ground truth."""

    key: str = Field(min_length=1, max_length=100)
    content: str = Field(min_length=1)
    kind: Literal["lesson", "fact", "preference", "note"] = "lesson"
    state: StateSpec | None = None
    action: str | None = None
    success: bool | None = True
    conditions: tuple[str, ...] = ()
    entity: str | None = None
    attribute: str | None = None
    value: FactValue = None
    tenant: str | None = None
    namespace: str | None = None
    roles: tuple[str, ...] = ()
    classification: str = "internal"
    consent: str | None = None
    consent_revoked: bool = False
    authority: Literal["inferred", "user_declared", "system_observed", "externally_verified"] = (
        "inferred"
    )
    valid_from: float | None = None
    valid_until: float | None = None
    policy_version: str | None = None
    track_record: TrackRecord = Field(default_factory=TrackRecord)
    applies: bool
    effect: Effect | None = None
    tags: tuple[str, ...] = ()

    @field_validator("classification")
    @classmethod
    def _classification(cls, v: str) -> str:
        _classification(v)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> MemorySpec:
        if self.consent_revoked and not self.consent:
            raise ValueError("consent_revoked needs a consent reference")
        if (self.entity is None) != (self.attribute is None):
            raise ValueError("entity and attribute go together")
        if (
            self.valid_from is not None
            and self.valid_until is not None
            and self.valid_until <= self.valid_from
        ):
            raise ValueError("valid_until must be later than valid_from")
        return self

    @property
    def effect_on_task(self) -> Effect:
        """What following this memory does: `effect`, or derived from `applies`."""
        if self.effect is not None:
            return self.effect
        return "helps" if self.applies else "misleads"

    @property
    def level(self) -> Classification:
        return _classification(self.classification)


class Scenario(_Model):
    """One present situation with the memories the store holds and their ground truth."""

    id: str = Field(min_length=1, max_length=200)
    domain: str = Field(min_length=1)
    slice: str = Field(min_length=1)
    description: str = ""
    namespace: str | None = None
    principal: PrincipalSpec
    intent: str = ""
    present: StateSpec
    policy: PolicySpec = Field(default_factory=PolicySpec)
    base_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    options: tuple[str, ...] = ()
    answer: str | None = None
    memories: tuple[MemorySpec, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        keys = [m.key for m in self.memories]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"memory keys must be unique; repeated: {', '.join(dupes)}")
        if self.answer is not None and self.options and self.answer not in self.options:
            raise ValueError("answer must be one of the options")
        return self

    @property
    def ns(self) -> str:
        """The namespace the task recalls from (default: the domain)."""
        return self.namespace or self.domain

    def memory(self, key: str) -> MemorySpec:
        for m in self.memories:
            if m.key == key:
                return m
        raise KeyError(key)

    def in_scope(self, m: MemorySpec) -> bool:
        """Whether the scenario's principal may read `m` (tenant, roles, classification)."""
        tenant = m.tenant or self.principal.tenant
        return (
            tenant == self.principal.tenant
            and set(m.roles) <= set(self.principal.roles)
            and m.level <= self.principal.level
        )

    def is_stale(self, m: MemorySpec) -> bool:
        """Expired, superseded by a later same-key fact here, or recorded under another policy."""
        if m.valid_until is not None and m.valid_until <= 0:
            return True
        if "stale" in m.tags:
            return True
        if m.policy_version and self.policy.version and m.policy_version != self.policy.version:
            return True
        if m.entity is None:
            return False
        start = m.valid_from if m.valid_from is not None else 0.0
        for other in self.memories:
            if other.key == m.key or other.entity != m.entity or other.attribute != m.attribute:
                continue
            if other.tenant != m.tenant or other.namespace != m.namespace:
                continue
            other_start = other.valid_from if other.valid_from is not None else 0.0
            if other_start > start:
                return True
        return False

    def is_poisoned(self, m: MemorySpec) -> bool:
        return "poisoned" in m.tags


class ScenarioFile(_Model):
    """The top level of a scenario file."""

    format: Literal["situated-eval/1"] = "situated-eval/1"
    description: str = ""
    scenarios: tuple[Scenario, ...] = Field(min_length=1)


def _classification(value: str) -> Classification:
    key = value.strip().lower()
    for member in Classification:
        if member.name.lower() == key:
            return member
    allowed = ", ".join(m.name.lower() for m in Classification)
    raise ValueError(f"{value!r} is not one of: {allowed}")


_TYPE_TAG = re.compile(r"^(str|int|float|bool|none|.*\[.*\])$")
"""Parts of a pydantic error location that name a union member or validator, not a field."""


def _loc(parts: Sequence[int | str]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, str) and _TYPE_TAG.match(p):
            continue
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else str(p)
    return out


def parse_scenarios(data: Any, source: str = "<data>") -> list[Scenario]:
    """Validate parsed JSON/YAML data; raises `ScenarioError` naming the first bad field."""
    if not isinstance(data, Mapping):
        raise ScenarioError(source, "a scenario file is an object with a 'scenarios' list")
    try:
        parsed = ScenarioFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = _loc([p for p in err.get("loc", ()) if isinstance(p, int | str)])
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        raise ScenarioError(f"{source}: {loc}" if loc else source, msg) from None
    seen: dict[str, int] = {}
    for i, sc in enumerate(parsed.scenarios):
        if sc.id in seen:
            raise ScenarioError(
                f"{source}: scenarios[{i}].id", f"{sc.id!r} repeats scenarios[{seen[sc.id]}]"
            )
        seen[sc.id] = i
    return list(parsed.scenarios)


def load_scenarios(path: Path | str) -> list[Scenario]:
    """Load one scenario file: `.json`, or `.yaml`/`.yml` when PyYAML is installed."""
    p = Path(path)
    name = p.name
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(name, f"cannot read {p}: {exc.strerror or exc}") from None
    if p.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ScenarioError(
                name, "YAML scenario files need PyYAML (pip install pyyaml)"
            ) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ScenarioError(name, f"not valid YAML: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScenarioError(name, f"not valid JSON: line {exc.lineno}: {exc.msg}") from None
    return parse_scenarios(data, name)


def load_many(paths: Iterable[Path | str]) -> list[Scenario]:
    """Load several files; scenario ids must be unique across them."""
    out: list[Scenario] = []
    seen: dict[str, str] = {}
    for path in paths:
        for sc in load_scenarios(path):
            if sc.id in seen:
                raise ScenarioError(
                    f"{Path(path).name}: {sc.id}", f"scenario id also used in {seen[sc.id]}"
                )
            seen[sc.id] = Path(path).name
            out.append(sc)
    return out


def shipped_paths() -> list[Path]:
    """The scenario files shipped inside the package, sorted by name."""
    root = resources.files("situated.eval") / "scenarios"
    return sorted(
        Path(str(p)) for p in root.iterdir() if p.name.endswith((".json", ".yaml", ".yml"))
    )


def dump_scenarios(scenarios: Sequence[Scenario], path: Path, description: str = "") -> None:
    """Write scenarios as a JSON scenario file (defaults left out, for readability)."""
    data = {
        "format": FORMAT,
        "description": description,
        "scenarios": [s.model_dump(mode="json", exclude_defaults=True) for s in scenarios],
    }
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
