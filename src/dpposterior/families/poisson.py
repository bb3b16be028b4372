"""Family ``poisson``: Poisson counts truncated to public bounds (Bernstein & Sheldon 2018, Sec. 3.3).

Model: x_i ~ Poisson(rate) (beyond the paper: the method claims any univariate exponential family), rate ~ Gamma(shape, rate).
Release: y = sum of the records inside ``bounds`` [a, b] + Laplace(Delta/eps) with
Delta = max(|a|, |b|, b - a) (App. C).  Output variable ``rate``.  Methods:
``gibbs-ss`` (Algorithm 2 with the random-sum CLT, auto), ``naive``, ``non-private``.
"""

from __future__ import annotations

from functools import partial

from . import Family, prior_moments
from ._expfam import (AUTO_ORDER, COUNT_MECHANISMS, auto_for_noise, PoissonRelease, curate_poisson, family_methods, parse_gamma_prior,
                      simulate_truncated)

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
)

# the prior's moments in the posterior's variables, for the prior-equals-posterior check
FAMILY.hooks["prior_moments"] = prior_moments.gamma_rate
