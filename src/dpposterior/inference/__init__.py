"""Inference engines, one module per algorithm (the SBI engines live in ``dpposterior.sbi``).

An engine is ``engine(model, options) -> Posterior``: it receives the release's observation model
(:class:`~dpposterior.observation.ObservationModel`: variables, prior -- the family's parsed prior object as
``model.prior.spec`` --, latent statistic, measurements, and the release itself as ``model.release``) and its own
typed options (a subclass of :class:`~dpposterior.options.EngineOptions`, built by the orchestrator).  It names its
draws through ``model.pack``.  The entry point that
picks and runs an engine is :func:`dpposterior.infer` (``dpposterior.api``); this package never
imports it (docs/architecture.md).  ``dpposterior.inference.infer`` is kept as a lazy alias of it.
"""

from __future__ import annotations

from ..options import MAX_TOTAL_DRAWS, InferenceOptions

__all__ = ["InferenceOptions", "MAX_TOTAL_DRAWS"]


def __getattr__(name):
    # ``from dpposterior.inference import infer`` (the path before the orchestrator moved to
    # dpposterior.api): resolved on first use, so this package does not import the layer above it
    if name in ("infer", "describe_prior"):
        import importlib

        return getattr(importlib.import_module("dpposterior.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
