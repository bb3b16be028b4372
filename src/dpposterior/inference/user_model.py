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

import numpy as np

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
    from . import sbi_common as common

    view = model.simulator_model(observed)
    extra = options.extra
    total = options.draws * options.chains
    if method == "smc-abc":
        from .smc_abc import run_smc_abc, smc_abc_options

        simulations, particles, tolerance, quantile = smc_abc_options(extra)
        res = run_smc_abc(view, simulations, particles, tolerance, quantile, options.seed)
        rng = np.random.default_rng(np.random.SeedSequence(options.seed).spawn(2)[1])
        theta = res.resample(total, rng)
        attrs = {"simulations": res.simulations, "particles": particles, "generations": len(res.generations),
                 "final_tolerance": res.tolerance, "tolerance_schedule": tolerance}
        extras = {"population": res.theta, "weights": res.weights}
    else:
        from ..sbi.flows import FlowConfig

        # the same options and defaults as the families' sppe / sple engines
        keys = {"simulations", "rounds", "rqmc_points", "rqmc", "max_epochs", "device"}
        if method == "sppe":
            keys |= {"num_atoms", "combined_loss", "proposal", "batch_size"}
        common.check_unused(extra, keys, method)
        simulations = common.int_option(extra, "simulations", 1000, minimum=20)
        rounds = common.int_option(extra, "rounds", 10)
        m = common.int_option(extra, "rqmc_points", 8, maximum=4096)
        rqmc = common.bool_option(extra, "rqmc", True)
        device = common.device_option(extra)
        if method == "sppe":
            from .sppe import run_sppe

            config = FlowConfig(max_epochs=common.int_option(extra, "max_epochs", FlowConfig.max_epochs),
                                batch_size=common.int_option(extra, "batch_size", FlowConfig.batch_size, minimum=2))
            res = run_sppe(view, simulations, rounds, rqmc_points=m, rqmc=rqmc, draws=total, seed=options.seed,
                           num_atoms=common.int_option(extra, "num_atoms", 10, minimum=2), config=config,
                           quiet=options.quiet, combined_loss=common.bool_option(extra, "combined_loss", False),
                           proposal=common.choice_option(extra, "proposal", "atomic", ("atomic", "truncated")),
                           device=device)
        else:
            from .sple import run_sple

            config = FlowConfig(max_epochs=common.int_option(extra, "max_epochs", FlowConfig.max_epochs))
            res = run_sple(view, simulations, rounds, rqmc_points=m, rqmc=rqmc, draws=total, seed=options.seed,
                           config=config, quiet=options.quiet, device=device)
        theta = res.theta
        attrs = {"simulations_per_round": simulations, "rounds": rounds, "rqmc_points": m, "rqmc": int(rqmc),
                 "total_simulations": simulations * rounds}
        extras = {"flow": res.flow, "rounds": res.rounds}
    return common.to_posterior(model.name, method, view, theta, options.chains, attrs, extras)


def infer_model(model, observed, options) -> Posterior:
    """Run ``options.method`` (already resolved) on ``model`` given the release ``observed``."""
    if observed is None:
        raise InputError("observed", "give the released values: infer(model, observed=[...])")
    obs = model.check(observed, likelihood=options.method == "da-mcmc")
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
