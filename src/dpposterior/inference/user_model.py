"""``dpposterior.infer(model, observed=...)``: every applicable engine on a user :class:`~dpposterior.Model`.

* ``da-mcmc`` -- data augmentation MCMC (Ju, Awan, Gong & Rao 2022;
  :mod:`~dpposterior.inference.da_mcmc`) when the model has ``record_logpdf`` or
  ``complete_posterior``;
* ``smc-abc``, ``sppe``, ``sple`` -- the simulation-based engines of Xiong, Ju & Zhang
  (App. C, Algorithms 1-2) on the model's :meth:`~dpposterior.Model.simulator_model` view.

``auto`` picks ``da-mcmc`` when the model has a record likelihood or a complete posterior,
``sppe`` otherwise (the issue-13 contract).  Engine options are the same keywords as for the
built-in families (``simulations``, ``rounds``, ... for SBI; ``record_sweeps``, ``theta_steps``,
``thin`` for da-mcmc).
"""

from __future__ import annotations


from ..errors import InputError
from ..posterior import Posterior

METHODS = ("da-mcmc", "smc-abc", "sppe", "sple")


def resolve_method(model, method: str) -> str:
    if not isinstance(method, str):
        raise InputError("method", "must be a string")
    if method == "auto":
        return "da-mcmc" if model.has_likelihood else "sppe"
    if method not in METHODS:
        raise InputError("method", f"unknown method {method!r} for a dpposterior.Model "
                         f"(one of: {', '.join(['auto', *METHODS])})")
    return method


def _sbi(method: str, model, observed, options) -> Posterior:
    """The families' own SBI engines, with their options and defaults, on the model's simulator view."""
    if method == "smc-abc":
        from ..sbi.smc_abc import smc_abc_on_model as run
    elif method == "sppe":
        from ..sbi.sppe import sppe_on_model as run
    else:
        from ..sbi.sple import sple_on_model as run
    return run(model.name, model.simulator_model(observed), options)


def infer_model(model, observed, options) -> Posterior:
    """Run ``options.method`` (already resolved) on ``model`` given the release ``observed``."""
    if observed is None:
        raise InputError("observed", "give the released values: infer(model, observed=[...])")
    obs = model.check(observed, likelihood=options.method == "da-mcmc")
    model.check_privacy_claim(obs)
    if options.method == "da-mcmc":
        from . import da_mcmc

        kw = da_mcmc.run_options(options)
        res = da_mcmc.run_da_mcmc(model, obs, draws=options.draws, warmup=options.warmup, chains=options.chains,
                                  seed=options.seed, **kw)
        post = da_mcmc.to_posterior(model.name, model, res)
    else:
        post = _sbi(options.method, model, obs, options)
    post.attrs.setdefault("model", model.name)
    post.attrs.setdefault("observed", obs.tolist())
    post.attrs.setdefault("n", model.n)
    eps, delta = model.mechanism.privacy_cost()
    post.attrs.setdefault("release_epsilon", eps)
    post.attrs.setdefault("release_delta", delta)
    post.extras.setdefault("user_model", model)
    return post
