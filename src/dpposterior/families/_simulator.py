"""The ``Family`` of a simulator problem (Xiong, Ju & Zhang: linreg-ju, SIR, log-linear).

A simulator family names its engines -- SMC-ABC (Algorithm 3), SPPE (Algorithm 1), SPLE
(Algorithm 2) and the noise-ignoring NPE -- by ``"module:function"`` strings, resolved only when
called, so this room never imports an engine (docs/architecture.md).  ``SBI_OPTIONS`` are the
analysis-file keys those engines accept; the engines parse them (``dpposterior.sbi.common``).
"""

from __future__ import annotations

from . import Family, prior_moments

#: analysis-file keys of the simulation-based engines (parsed by each engine, dpposterior.sbi.common)
SBI_OPTIONS = ("simulations", "rounds", "rqmc_points", "rqmc", "particles", "tolerance", "quantile",
               "max_epochs", "num_atoms", "combined_loss", "proposal", "batch_size", "device", "training",
               "correction")


def sbi_analysis_keys() -> frozenset:
    return frozenset(SBI_OPTIONS)


def sbi_family(name, release_model, parse_prior, simulate, sbi_model, description, curate=None,
               mechanisms=("laplace",)):
    """The ``Family`` of a simulator problem: the three likelihood-free engines, SPPE by default,
    and ``naive`` (noise-ignoring NPE, :mod:`~dpposterior.sbi.naive`) for comparison."""
    return Family(
        name=name,
        release_model=release_model,
        methods={"smc-abc": "dpposterior.sbi.smc_abc:smc_abc",
                 "sppe": "dpposterior.sbi.sppe:sppe",
                 "sple": "dpposterior.sbi.sple:sple",
                 "naive": "dpposterior.sbi.naive:naive"},
        auto_method="sppe",
        parse_prior=parse_prior,
        curate=curate,
        analysis_keys=sbi_analysis_keys(),
        naive_method="naive",
        naive_by_default=False,  # the naive NPE trains a flow: opt-in with --naive
        description=description,
        simulate=simulate,
        # prior_moments: the prior-equals-posterior check (issue 32), by Monte Carlo in the output variables
        hooks={"sbi_model": sbi_model, "prior_moments": prior_moments.monte_carlo(sbi_model)},
        mechanisms=tuple(mechanisms),
    )
