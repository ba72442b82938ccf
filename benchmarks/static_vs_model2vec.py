"""The shipped static embedder against model2vec's own inference, on the same model folder.

    pip install model2vec && python benchmarks/static_vs_model2vec.py

Prints the largest difference between the two (L2-normalised) vectors over 2,005 texts, the
median time of a batch and of one text in-process, and the median wall time of a process that
imports, loads the model and embeds one text. situated keeps its own inference (numpy and
`tokenizers`) while model2vec gives the same vectors no faster; model2vec is not a dependency.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

os.environ.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", RAYON_NUM_THREADS="1",
                  HF_HUB_OFFLINE="1")

import numpy as np

from situated.embed.static import StaticEmbedder, default_model_path

RUNS = 7
ONE_SHOT = {
    "situated": "from situated.embed.static import StaticEmbedder; StaticEmbedder().embed(['x'])",
    "model2vec": "from model2vec import StaticModel; from situated.embed.static import "
                 "default_model_path; StaticModel.from_pretrained(str(default_model_path()))"
                 ".encode(['x'])",
}


def median_seconds(fn: object, runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    from model2vec import StaticModel

    texts = [f"Annual plan customer {i} asks for a refund after {i % 90} days; the stove is "
             f"{'on' if i % 2 else 'off'}." for i in range(2000)]
    texts += ["", "a", "x" * 5000, "héllo wörld ünïcode", "日本語のテキスト"]
    ours = StaticEmbedder()
    theirs = StaticModel.from_pretrained(str(default_model_path()))
    a = ours.embed(texts)
    b = np.nan_to_num(np.asarray(theirs.encode(texts), dtype=np.float64))
    norms = np.linalg.norm(b, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    b /= norms
    cos = np.sum(a * b, axis=1)[np.linalg.norm(a, axis=1) > 0]
    print(f"{len(texts)} texts: max |difference| {np.abs(a - b).max():.1e}, "
          f"min cosine {cos.min():.6f}")
    one = ["customer wants a refund on an annual plan"]
    print(f"batch of {len(texts)}: situated {median_seconds(lambda: ours.embed(texts)) * 1e3:.0f}"
          f" ms, model2vec {median_seconds(lambda: theirs.encode(texts)) * 1e3:.0f} ms")
    print(f"one text: situated {median_seconds(lambda: ours.embed(one), 51) * 1e3:.3f} ms, "
          f"model2vec {median_seconds(lambda: theirs.encode(one), 51) * 1e3:.3f} ms")
    walls: dict[str, list[float]] = {k: [] for k in ONE_SHOT}
    for _ in range(RUNS):
        for name, code in ONE_SHOT.items():
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
            walls[name].append(time.perf_counter() - started)
    print("process that loads the model and embeds one text: " + ", ".join(
        f"{k} {statistics.median(v):.2f} s" for k, v in walls.items()))


if __name__ == "__main__":
    main()
