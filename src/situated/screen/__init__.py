"""Screening text for prompt injection: normalisation, decoded views and a small classifier."""

from situated.screen.classifier import (
    InjectionModel,
    Screening,
    injection_score,
    load_model,
    screen,
    threshold,
)
from situated.screen.normalise import Normalised, View, decoded_views, normalise, skeleton

__all__ = [
    "InjectionModel",
    "Normalised",
    "Screening",
    "View",
    "decoded_views",
    "injection_score",
    "load_model",
    "normalise",
    "screen",
    "skeleton",
    "threshold",
]
