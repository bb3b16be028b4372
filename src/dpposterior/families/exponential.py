"""Family ``exponential``: Exponential records truncated to public bounds (Bernstein & Sheldon 2018, Sec. 3.3).

Model: x_i ~ Exponential(rate), rate ~ Gamma(shape, rate).
Release: y = sum of the records inside ``bounds`` [a, b] + Laplace(Delta/eps) with
Delta = max(|a|, |b|, b - a) (App. C).  Output variable ``rate``.  Methods:
``gibbs-ss`` (Algorithm 2 with the random-sum CLT, auto), ``naive``, ``non-private``.
"""

from __future__ import annotations

from functools import partial

from . import Family, prior_moments
from ._expfam import (ExponentialRelease, curate_exponential, expfam_observation_model, family_methods,
                      parse_gamma_prior, simulate_truncated)
from ..observation import MOMENTS, SIMULATE, ObservationModel


def observation_model(release: ExponentialRelease, prior=None) -> ObservationModel:
    """The release as one measurement, the noisy sum of the n exponential records inside the public bounds;
    variable ``rate``.

    Its latent statistic offers moments and simulation (real records: no enumeration; no record model)."""
    return expfam_observation_model(release, parse_gamma_prior(prior, release), {MOMENTS, SIMULATE})


FAMILY = Family(
    name="exponential",
    release_model=ExponentialRelease,
    methods=family_methods(),
    auto_method="gibbs-ss",
    parse_prior=parse_gamma_prior,
    curate=curate_exponential,
    naive_method="naive",
    description="Exponential records, Laplace-noised sum over truncation bounds (Bernstein & Sheldon 2018)",
    simulate=partial(simulate_truncated, "exponential"),
    hooks={"observation_model": observation_model},
)

# the prior's moments in the posterior's variables, for the prior-equals-posterior check
FAMILY.hooks["prior_moments"] = prior_moments.gamma_rate
