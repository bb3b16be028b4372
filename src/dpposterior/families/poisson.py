"""Family ``poisson``: Poisson counts truncated to public bounds (Bernstein & Sheldon 2018, Sec. 3.3).

Model: x_i ~ Poisson(rate) (beyond the paper: the method claims any univariate exponential family), rate ~ Gamma(shape, rate).
Release: y = sum of the records inside ``bounds`` [a, b] + Laplace(Delta/eps) with
Delta = max(|a|, |b|, b - a) (App. C).  Output variable ``rate``.  Methods:
``gibbs-ss`` (Algorithm 2 with the random-sum CLT, auto), ``naive``, ``non-private``.
"""

from __future__ import annotations

from functools import partial

from . import Family, prior_moments
from ._expfam import (AUTO_ORDER, COUNT_MECHANISMS, auto_for_noise, PoissonRelease, curate_poisson,
                      expfam_observation_model, family_methods, parse_gamma_prior, simulate_truncated)
from ..observation import ENUMERATE, MOMENTS, SIMULATE, ObservationModel


def observation_model(release: PoissonRelease, prior=None) -> ObservationModel:
    """The release as one measurement, the noisy sum of the n Poisson counts inside the public bounds; variable
    ``rate``.

    Its latent statistic offers enumeration (``exact``), moments and simulation; no record model (no
    ``da-mcmc``)."""
    return expfam_observation_model(release, parse_gamma_prior(prior, release), {ENUMERATE, MOMENTS, SIMULATE})


FAMILY = Family(
    name="poisson",
    release_model=PoissonRelease,
    methods=family_methods(exact=True),
    auto_method="gibbs-ss",
    auto_rule=auto_for_noise,
    auto_order=AUTO_ORDER,
    mechanisms=COUNT_MECHANISMS,
    simulate_mechanisms=COUNT_MECHANISMS,
    simulates_integer_noise=True,
    parse_prior=parse_gamma_prior,
    curate=curate_poisson,
    naive_method="naive",
    description="Poisson counts, Laplace-noised sum over truncation bounds (Bernstein & Sheldon 2018)",
    simulate=partial(simulate_truncated, "poisson"),
    hooks={"observation_model": observation_model},
)

# the prior's moments in the posterior's variables, for the prior-equals-posterior check
FAMILY.hooks["prior_moments"] = prior_moments.gamma_rate
