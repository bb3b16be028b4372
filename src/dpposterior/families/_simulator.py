"""The ``Family`` of a simulator problem (Xiong, Ju & Zhang: linreg-ju, SIR, log-linear).

A simulator family names its engines -- SMC-ABC (Algorithm 3), SPPE (Algorithm 1), SPLE
(Algorithm 2) and the noise-ignoring NPE -- by :class:`EngineSpec` strings, resolved only when
called, so this room never imports an engine (docs/architecture.md).  Each engine's options class
(in its own module) lists the options it takes.
"""

from __future__ import annotations

from . import DA_MCMC, EngineSpec, Family, prior_moments

#: the simulation-based engines, as a user ``dpposterior.Model`` offers them too (``Model.methods``)
SBI_METHODS = {"smc-abc": EngineSpec.of("dpposterior.sbi.smc_abc", "smc_abc", "SmcAbcOptions"),
               "sppe": EngineSpec.of("dpposterior.sbi.sppe", "sppe", "SppeOptions"),
               "sple": EngineSpec.of("dpposterior.sbi.sple", "sple", "SpleOptions")}


def sbi_family(name, release_model, parse_prior, simulate, sbi_model, description, curate=None,
               mechanisms=("laplace",), da_model=None, auto_method="sppe"):
    """The ``Family`` of a simulator problem: the three likelihood-free engines, SPPE by default,
    and ``naive`` (noise-ignoring NPE, :mod:`~dpposterior.sbi.naive`) for comparison; with a record
    model (``da_model(release, prior) -> (Model, observed)``) also ``da-mcmc``."""
    methods = {**SBI_METHODS, "naive": EngineSpec.of("dpposterior.sbi.naive", "naive", "NaiveNpeOptions")}
    def observation_model(release, prior):
        # the simulator model's view: a latent statistic that offers simulation, held as its state
        return sbi_model(release, prior).observation_model(name)

    hooks = {"sbi_model": sbi_model, "prior_moments": prior_moments.monte_carlo(sbi_model),
             "observation_model": observation_model}
    if da_model is not None:
        methods["da-mcmc"] = DA_MCMC
        hooks["da_model"] = da_model
    return Family(
        name=name,
        release_model=release_model,
        methods=methods,
        auto_method=auto_method,
        parse_prior=parse_prior,
        curate=curate,
        naive_method="naive",
        naive_by_default=False,  # the naive NPE trains a flow: opt-in with --naive
        description=description,
        simulate=simulate,
        # prior_moments: the prior-equals-posterior check, by Monte Carlo in the output variables
        hooks=hooks,
        mechanisms=tuple(mechanisms),
    )
