"""Measure the relevance floor per embedder on real text (LoCoMo), and print the table.

A memory with no situation to compare (a note, a preference, a fact, or a lesson whose source
state is unknown) is judged by how relevant its content is to the present (the cosine of the
query, intent and present state, with the memory's content). The floor under which such a
memory is NOT_APPLICABLE is set per embedder from the similarities of related and unrelated
pairs of text written elsewhere:

- related: a LoCoMo question and each turn its gold evidence names;
- unrelated: the same question and turns of *other* conversations (5 per question, seeded).

The floor is the similarity that `UNRELATED_PASS` of unrelated pairs reach (a chosen
false-acceptance rate); the table shows what share of related pairs each choice keeps. Run from the
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

from situated.embed import get_embedder  # noqa: E402
from situated.eval.conversations import load_locomo  # noqa: E402

UNRELATED_PASS = 0.10
"""The false-acceptance rate the shipped floors are set at (`situated.recall.reconstruct.rules.
RELEVANCE_FLOORS`); the table shows the neighbours too."""
OPERATING_POINTS = (0.01, 0.05, 0.10, 0.20)
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
        for point in OPERATING_POINTS:
            floor = float(np.quantile(unr, 1 - point))
            floors[(name, point)] = (floor, float((rel >= floor).mean()),
                                     float((unr >= floor).mean()))
    print("\nfloor = the similarity a given share of unrelated pairs reach "
          f"(shipped: {UNRELATED_PASS:.0%})")
    print(f"{'embedder':16} {'target':>6} {'floor':>6} {'related kept':>13} "
          f"{'unrelated passing':>18}")
    for (name, point), (floor, kept, passing) in floors.items():
        mark = "  <- shipped" if point == UNRELATED_PASS else ""
        print(f"{name:16} {point:6.0%} {floor:6.3f} {kept:13.1%} {passing:18.1%}{mark}")


if __name__ == "__main__":
    main()
