"""The `learned` reconstructor: an applicability model fitted on this store's own feedback.

Each labelled example is one memory that an agent *used* in a recall that got feedback:
label 1 if the episode succeeded, 0 if it failed. Features come from the recall record (what
the pipeline saw at the time): then/now state similarity, lesson similarity, relevance, the
`rules` verdict and confidence, condition matches / mismatches / unknowns, trust, freshness and
the utility the memory had then. The model is an L2-regularised logistic regression fitted by
iteratively reweighted least squares (numpy; a few dozen features, no heavy dependency).

Models are per tenant: one tenant's outcomes never shape another tenant's verdicts.
Until `MIN_LABELLED` examples exist the reconstructor behaves exactly like `rules`. After
that, `rules` still decides hard mismatches (its NOT_APPLICABLE stands); for candidates `rules`
would serve, the model's probability becomes the confidence, and a probability under
`REJECT_BELOW` rejects with LOW_EXPECTED_UTILITY. Calibration (Brier score on the training
data and on a held-out fifth) is kept for `stats`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from situated.recall.briefing import Reconstruction, RejectionReason, Verdict
from situated.recall.reconstruct.base import (
    ReconstructionInput,
    Reconstructor,
    register_reconstructor,
)
from situated.recall.reconstruct.rules import RulesReconstructor
from situated.store.scope import SYSTEM

MIN_LABELLED = 30
"""Labelled uses needed before the model is trusted over `rules`."""
REJECT_BELOW = 0.25
APPLICABLE_ABOVE = 0.75
REFIT_EVERY = 20
"""Refit after this many new labelled examples (also refit by `maintain`)."""
FEATURES = (
    "bias", "state_sim", "has_state", "content_sim", "relevance", "rules_conf",
    "rules_applicable", "matched", "mismatched", "unknown", "adapted",
)

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Calibration:
    """How well the fitted model's probabilities match outcomes (lower Brier is better)."""

    examples: int
    brier_train: float
    brier_holdout: float | None
    base_rate: float


def features(recon: dict[str, Any], numbers: dict[str, Any]) -> list[float]:
    """The feature vector of one candidate, from its reconstruction and retrieval numbers."""
    state_sim = numbers.get("state_similarity")
    return [
        1.0,
        float(state_sim) if state_sim is not None else 0.0,
        0.0 if state_sim is None else 1.0,
        float(numbers.get("content_similarity") or 0.0),
        float(numbers.get("relevance") or 0.0),
        float(recon.get("confidence") or 0.0),
        1.0 if recon.get("verdict") == Verdict.APPLICABLE.value else 0.0,
        math.log1p(len(recon.get("matched") or ())),
        math.log1p(len(recon.get("mismatched") or ())),
        math.log1p(len(recon.get("unknown") or ())),
        1.0 if recon.get("adaptations") else 0.0,
    ]


def fit_logistic(x: Array, y: Array, l2: float = 1.0, iterations: int = 25) -> Array:
    """L2-regularised logistic regression by IRLS (Newton's method)."""
    w = np.zeros(x.shape[1])
    reg = l2 * np.eye(x.shape[1])
    reg[0, 0] = 0.0  # no penalty on the bias
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (p - y) + reg @ w
        hess = x.T @ (x * (p * (1 - p))[:, None]) + reg + 1e-9 * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.max(np.abs(step))) < 1e-8:
            break
    return w


def predict(w: Array, x: Array) -> Array:
    out: Array = 1.0 / (1.0 + np.exp(-(x @ w)))
    return out


class LearnedReconstructor(Reconstructor):
    """`rules`, refined by a model of which served memories actually helped here."""

    name = "learned"
    version = "1"

    def __init__(self, min_labelled: int = MIN_LABELLED) -> None:
        self.rules = RulesReconstructor()
        self.min_labelled = min_labelled
        self.weights: dict[str, Array] = {}
        self.calibrations: dict[str, Calibration] = {}
        self._store: Any = None
        self._fitted_on: dict[str, int] = {}

    def bind(self, store: Any) -> None:
        self._store = store
        self.weights, self.calibrations, self._fitted_on = {}, {}, {}

    def calibration_for(self, tenant: str) -> Calibration | None:
        """The tenant's model calibration (fitting it first if never fitted)."""
        if tenant not in self._fitted_on:
            self.fit(tenant)
        return self.calibrations.get(tenant)

    def training_data(self, tenant: str) -> tuple[Array, Array]:
        """(X, y) from the tenant's recalls with feedback in the bound store."""
        if self._store is None:
            return np.zeros((0, len(FEATURES))), np.zeros(0)
        rows = self._store.labelled_recalls(tenant, SYSTEM)
        xs: list[list[float]] = []
        ys: list[float] = []
        for payload, success, used in rows:
            data = json.loads(payload)
            recons = data.get("reconstructions", {})
            for mid in json.loads(used):
                recon = recons.get(mid)
                if recon is None:
                    continue
                xs.append(features(recon, recon.get("provenance", {})))
                ys.append(float(success))
        if not xs:
            return np.zeros((0, len(FEATURES))), np.zeros(0)
        return np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)

    def tenants(self) -> list[str]:
        if self._store is None:
            return []
        tenants: list[str] = self._store.feedback_tenants(SYSTEM)
        return tenants

    def fit(self, tenant: str | None = None) -> Calibration | None:
        """Refit the tenant's model (every tenant's when None) on its labelled uses; returns
        the calibration of `tenant` (of the last one fitted when None), None if too few."""
        last: Calibration | None = None
        for t in [tenant] if tenant is not None else self.tenants():
            last = self._fit_one(t)
        return last

    def _fit_one(self, tenant: str) -> Calibration | None:
        x, y = self.training_data(tenant)
        self._fitted_on[tenant] = len(y)
        self.weights.pop(tenant, None)
        self.calibrations.pop(tenant, None)
        if len(y) < self.min_labelled or len(set(y.tolist())) < 2:
            return None
        cut = len(y) - max(1, len(y) // 5)
        holdout = None
        if cut >= self.min_labelled // 2:
            w_cv = fit_logistic(x[:cut], y[:cut])
            holdout = float(np.mean((predict(w_cv, x[cut:]) - y[cut:]) ** 2))
        w = fit_logistic(x, y)
        self.weights[tenant] = w
        train = float(np.mean((predict(w, x) - y) ** 2))
        cal = Calibration(len(y), round(train, 4),
                          None if holdout is None else round(holdout, 4),
                          round(float(y.mean()), 4))
        self.calibrations[tenant] = cal
        return cal

    def _maybe_refit(self, tenant: str) -> None:
        if self._store is None:
            return
        labelled = self._store.count_labelled(tenant, SYSTEM)
        if tenant not in self._fitted_on or labelled - self._fitted_on[tenant] >= REFIT_EVERY:
            self.fit(tenant)

    def reconstruct(self, item: ReconstructionInput) -> Reconstruction:
        base = self.rules.reconstruct(item)
        tenant = item.record.scope.tenant
        self._maybe_refit(tenant)
        weights = self.weights.get(tenant)
        if weights is None or base.verdict not in (Verdict.APPLICABLE, Verdict.PARTIAL):
            return replace(base, provenance=base.provenance | {"learned": False})
        numbers = {
            "state_similarity": item.state_similarity,
            "content_similarity": item.content_similarity,
            "relevance": item.relevance,
        }
        recon_view = {
            "confidence": base.confidence, "verdict": base.verdict.value,
            "matched": base.matched, "mismatched": base.mismatched, "unknown": base.unknown,
            "adaptations": base.adaptations,
        }
        x = np.asarray([features(recon_view, numbers)], dtype=np.float64)
        p = float(predict(weights, x)[0])
        prov = base.provenance | {
            "reconstructor": self.name, "reconstructor_version": self.version,
            "learned": True, "p_success": round(p, 4),
            "trained_on": self.calibrations[tenant].examples if tenant in self.calibrations
            else 0,
        }
        if p < REJECT_BELOW:
            return replace(
                base, verdict=Verdict.NOT_APPLICABLE, guidance="", transferable=(),
                confidence=round(1 - p, 3), reason=RejectionReason.LOW_EXPECTED_UTILITY,
                detail=f"learned model: p(success | used) = {p:.2f} < {REJECT_BELOW}",
                provenance=prov,
            )
        verdict = base.verdict
        if verdict is Verdict.PARTIAL and p >= APPLICABLE_ABOVE and not base.mismatched:
            verdict = Verdict.APPLICABLE
        return replace(base, verdict=verdict, confidence=round(p, 3), provenance=prov)


register_reconstructor("learned", LearnedReconstructor)
