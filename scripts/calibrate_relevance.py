"""Measure the relevance floor per embedder on real text (LoCoMo), and print the table.

A memory with no situation to compare (a note, a preference, a fact, or a lesson whose source
state is unknown) is judged by how relevant its content is to the present (the cosine of the
query, intent and present state, with the memory's content). The floor under which such a
memory is NOT_APPLICABLE is set per embedder from the similarities of related and unrelated
pairs of text written elsewhere:

- related: a LoCoMo question and each turn its gold evidence names;
- unrelated: the same question and turns of *other* conversations (5 per question, seeded).

The floor is the similarity `RELATED_KEPT` of related pairs reach: it rejects what is clearly
unrelated and costs few relevant memories, which have nothing else to be judged by; ranking,
`k` and the token budget order the rest. The table shows the other choices: the floors that let
a given share of unrelated pairs through, and what share of related pairs each keeps. Run from the
repository root with the `eval` extra:

    .venv/bin/python scripts/calibrate_relevance.py [--embedders hash,minilm-static]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from situated.embed import get_embedder
from situated.eval.conversations import load_locomo

RELATED_KEPT = 0.95
"""The share of related pairs at or above the shipped floors (each built-in embedder's
`relevance_floor`)."""
OPERATING_POINTS = (0.05, 0.10, 0.20, 0.40)
"""Shares of unrelated pairs let through, for the comparison table."""
PER_QUESTION = 5
SEED = 3


def pairs() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    convs = load_locomo()
    rng = random.Random(SEED)
    related: list[tuple[str, str]] = []
    unrelated: list[tuple[str, str]] = []
    for conv in convs:
        by_turn = {u.turn: u.text for u in conv.units}
        others = [u.text for c in convs if c.id != conv.id for u in c.units]
        for q in conv.questions:
            related += [(q.text, by_turn[t]) for t in sorted(q.gold_turns) if t in by_turn]
            unrelated += [(q.text, t) for t in rng.sample(others, PER_QUESTION)]
    return related, unrelated


def similarities(embedder: str, items: list[tuple[str, str]]) -> np.ndarray:
    emb = get_embedder(embedder)
    texts = sorted({t for pair in items for t in pair})
    vecs = dict(zip(texts, emb.embed(texts), strict=True))
    return np.array([float(np.dot(vecs[a], vecs[b])) for a, b in items])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedders", default="hash,minilm-static")
    names = parser.parse_args().embedders.split(",")
    related, unrelated = pairs()
    print(f"LoCoMo: {len(related)} related pairs (question, gold turn), {len(unrelated)} "
          f"unrelated (question, turn of another conversation)\n")
    qs = (5, 25, 50, 75, 95)
    print(f"{'embedder':16} {'pairs':10} " + " ".join(f"{'p' + str(q):>6}" for q in qs))
    floors = {}
    for name in names:
        rel, unr = similarities(name, related), similarities(name, unrelated)
        for label, sims in (("related", rel), ("unrelated", unr)):
            cells = " ".join(f"{np.percentile(sims, q):6.3f}" for q in qs)
            print(f"{name:16} {label:10} {cells}")
        shipped = floor_of(rel)
        floors[(name, "shipped")] = (shipped, float((rel >= shipped).mean()),
                                     float((unr >= shipped).mean()))
        for point in OPERATING_POINTS:
            floor = float(np.quantile(unr, 1 - point))
            floors[(name, f"{point:.0%} unrel.")] = (floor, float((rel >= floor).mean()),
                                                    float((unr >= floor).mean()))
    print(f"\nshipped floor: the similarity {RELATED_KEPT:.0%} of related pairs reach; "
          "others: the similarity a share of unrelated pairs reach")
    print(f"{'embedder':16} {'rule':>12} {'floor':>6} {'related kept':>13} "
          f"{'unrelated passing':>18}")
    for (name, rule), (floor, kept, passing) in floors.items():
        print(f"{name:16} {rule:>12} {floor:6.3f} {kept:13.1%} {passing:18.1%}")


def floor_of(related: np.ndarray) -> float:
    """The shipped rule: the similarity `RELATED_KEPT` of related pairs reach."""
    return float(np.quantile(related, 1 - RELATED_KEPT))

if __name__ == "__main__":
    main()
