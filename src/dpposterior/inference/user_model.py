"""``dpposterior.infer(model, observed=...)``: a user :class:`~dpposterior.Model` run by the engine it names.

A model lists its engines in the families' form, ``Model.methods`` (:class:`~dpposterior.families.EngineSpec`:
``on_model(model, observed, options)`` and the engine's options class):

* ``da-mcmc`` -- data augmentation MCMC (Ju, Awan, Gong & Rao 2022;
  :mod:`~dpposterior.inference.da_mcmc`) when the model has ``record_logpdf`` or
  ``complete_posterior``;
* ``smc-abc``, ``sppe``, ``sple`` -- the simulation-based engines of Xiong, Ju & Zhang
  (App. C, Algorithms 1-2) on the model's :meth:`~dpposterior.Model.simulator_model` view.

``auto`` is ``Model.auto_method``: ``da-mcmc`` when the model has a record likelihood or a complete
posterior, ``sppe`` otherwise.  Engine options are the same keywords as for the
built-in families, checked by the engine's options class.
"""

from __future__ import annotations

from ..errors import InputError
from ..posterior import Posterior


def resolve_method(model, method: str) -> str:
    """``method`` (``auto`` resolved) if ``model`` offers it; else a one-line refusal listing its methods."""
    if not isinstance(method, str):
        raise InputError("method", "must be a string")
    if method == "auto":
        return model.auto_method
    if method not in model.methods:
        raise InputError("method", f"unknown method {method!r} for a dpposterior.Model "
                         f"(one of: {', '.join(['auto', *model.methods])})")
    return method


def check_model(model, observed, method: str):
    """Everything the engine and the orchestrator will ask of ``model``, checked before any work: the
    released values, the privacy claim and the privacy cost.  Returns the observed values as an array."""
    if observed is None:
        raise InputError("observed", "give the released values: infer(model, observed=[...])")
    obs = model.check(observed, likelihood=method == "da-mcmc")
    model.check_privacy_claim(obs)
    try:
        model.mechanism.privacy_cost()
    except (TypeError, ValueError) as exc:
        raise InputError("model.mechanism", f"{type(model.mechanism).__name__} states no privacy cost ({exc}): "
                         "give it epsilon (and delta), or the sensitivity it is calibrated to") from None
    return obs


def infer_model(model, obs, method: str, options) -> Posterior:
    """Run ``method`` (resolved) on ``model`` given ``obs`` (from :func:`check_model`) with the engine's typed
    ``options``."""
    from ..families import resolve

    post = resolve(model.methods[method].run)(model, obs, options)
    post.attrs.setdefault("model", model.name)
    post.attrs.setdefault("observed", obs.tolist())
    post.attrs.setdefault("n", model.n)
    eps, delta = model.mechanism.privacy_cost()
    post.attrs.setdefault("release_epsilon", eps)
    post.attrs.setdefault("release_delta", delta)
    post.extras.setdefault("user_model", model)
    return post
