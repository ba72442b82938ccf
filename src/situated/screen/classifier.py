"""The injection classifier: a logistic regression shipped in `screen/model/`, numpy only.

Built by `scripts/build_injection_model.py` from prompt-injection, jailbreak and benign text
published in PyPI packages (provenance in `model/manifest.json`, held-out figures in
`model/report.json`). Nothing here touches the network; the model is read on first use.

`injection_score(text)` normalises the text (`normalise`), scores the original and each
decoded view (`decoded_views`) and returns the highest probability. `screen(text)` returns the
same score with what was found. The decision threshold (`threshold()`, stored in
`model/config.json`) was chosen on the validation split (source-grouped cross-validation over
the training sources), never on the held-out split.

Not wired into the write gates yet: `screen(text).held` is the ready signal for them.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from situated.errors import ModelError
from situated.screen.features import FeatureSpec, Featuriser
from situated.screen.normalise import decoded_views, normalise

MODEL_DIR = Path(__file__).resolve().parent / "model"
WEIGHTS_FILE = "injection-lr.npz"
CONFIG_FILE = "config.json"
CACHED_TEXTS = 8192
"""Screenings remembered per process (`InjectionModel.screen_many`)."""


@dataclass(frozen=True)
class Screening:
    """What the classifier made of one text."""

    score: float
    """Highest probability of injection over the original and its decoded views."""
    held: bool
    """`score >= threshold`: the text should be held for review."""
    threshold: float
    view: str
    """The view that scored highest (`original`, `base64`, `rot13`, ...)."""
    views: tuple[str, ...]
    hidden_controls: int
    folded_words: int


class InjectionModel:
    """A loaded classifier: feature spec, weights, bias and threshold."""

    def __init__(self, folder: Path = MODEL_DIR) -> None:
        config_path = folder / CONFIG_FILE
        weights_path = folder / WEIGHTS_FILE
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
            arrays = np.load(weights_path)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read injection model in {folder}: {exc}") from exc
        self.folder = folder
        self.version = str(config["version"])
        self.threshold = float(config["threshold"])
        self.spec = FeatureSpec.from_dict(config["features"])
        self.hash_weights: npt.NDArray[np.float32] = arrays["hash_weights"].astype(np.float32)
        self.embed_weights: npt.NDArray[np.float32] = arrays["embed_weights"].astype(np.float32)
        self.bias = float(arrays["bias"])
        if self.hash_weights.shape != (self.spec.buckets,):
            raise ModelError(
                f"{weights_path}: {self.hash_weights.shape[0]} hash weights, "
                f"expected {self.spec.buckets}"
            )
        self.featuriser = Featuriser(self.spec)
        self._cache: dict[str, Screening] = {}
        self.classified = 0
        """Texts scored so far (a remembered screening is not scored again)."""
        if self.embed_weights.shape != (self.featuriser.embedder.dim,):
            raise ModelError(f"{weights_path}: embedding weights of the wrong size")

    def probabilities(self, texts: list[str]) -> npt.NDArray[np.float64]:
        """P(injection) of each already-normalised text, one view each."""
        if not texts:
            return np.zeros(0, dtype=np.float64)
        feats = self.featuriser.features(texts)
        logits = np.array(
            [
                self.bias
                + float(np.dot(self.hash_weights[f.indices], f.values))
                + float(np.dot(self.embed_weights, f.embedding))
                for f in feats
            ],
            dtype=np.float64,
        )
        return 1.0 / (1.0 + np.exp(-logits))

    def fast_probabilities(self, texts: list[str]) -> npt.NDArray[np.float64]:
        """`probabilities`, computed for all texts at once (one embedding batch, the hashed
        part vectorised by `Featuriser.hashed_scores`): equal to it up to float rounding
        (`tests/test_write_fast.py`); `probabilities` stays the reference the training
        script uses."""
        if not texts:
            return np.zeros(0, dtype=np.float64)
        f = self.featuriser
        clipped = [f._fold(t[: self.spec.max_chars]) for t in texts]
        emb = f.embedder.embed_batch(clipped) * np.float32(self.spec.embed_scale)
        # a row-wise sum, not a matrix product: BLAS sums in an order that depends on how
        # many rows a batch has, and a text's score must not depend on its batch
        embedded = (emb.astype(np.float64) * self.embed_weights.astype(np.float64)).sum(axis=1)
        logits = self.bias + f.hashed_scores(texts, self.hash_weights) + embedded
        out: npt.NDArray[np.float64] = 1.0 / (1.0 + np.exp(-logits))
        return out

    def screen(self, text: str) -> Screening:
        """Normalise `text`, score it and its decoded views, keep the highest score."""
        return self.screen_many([text])[0]

    def screen_many(self, texts: list[str]) -> list[Screening]:
        """`screen` of each text, all views of all texts scored in one pass; the results of
        the last `CACHED_TEXTS` texts are remembered (`forget` empties them)."""
        with _LOCK:
            found = {t: self._cache.pop(t) for t in texts if t in self._cache}
            self._cache.update(found)  # the most recently used last: evicted last
        todo = list(dict.fromkeys(t for t in texts if t not in found))
        if todo:
            self.classified += len(todo)
            norms = [normalise(t) for t in todo]
            views = [decoded_views(n) for n in norms]
            probs = self.fast_probabilities([v.text for vs in views for v in vs])
            at = 0
            with _LOCK:
                for text, norm, vs in zip(todo, norms, views, strict=True):
                    mine = probs[at : at + len(vs)]
                    at += len(vs)
                    best = int(np.argmax(mine)) if mine.size else 0
                    score = float(mine[best]) if mine.size else 0.0
                    found[text] = self._cache[text] = Screening(
                        score=score, held=score >= self.threshold, threshold=self.threshold,
                        view=vs[best].name if vs else "original",
                        views=tuple(v.name for v in vs),
                        hidden_controls=norm.hidden_controls, folded_words=norm.folded_words,
                    )
                    while len(self._cache) > CACHED_TEXTS:
                        del self._cache[next(iter(self._cache))]
        return [found[t] for t in texts]

    def forget(self) -> None:
        """Empty the remembered screenings (they name no text, but are keyed by it)."""
        with _LOCK:
            self._cache.clear()


_MODEL: InjectionModel | None = None
_LOCK = threading.RLock()


def load_model() -> InjectionModel:
    """The shipped model, loaded once per process."""
    global _MODEL
    if _MODEL is None:
        with _LOCK:
            if _MODEL is None:
                _MODEL = InjectionModel()
    return _MODEL


def clear_screen_cache() -> None:
    """Forget every screened text (erasure: no erased text stays in this process)."""
    if _MODEL is not None:
        _MODEL.forget()


def screen(text: str) -> Screening:
    """Screen one text with the shipped classifier (see `Screening`)."""
    return load_model().screen(text)


def injection_score(text: str) -> float:
    """P(`text` is a prompt injection) in [0, 1], the maximum over its normalised original and
    decoded views. Hold for review at or above `threshold()`."""
    return load_model().screen(text).score


def threshold() -> float:
    """The shipped model's decision threshold (chosen on the validation split)."""
    return load_model().threshold
