"""Family ``binomial``: Bernoulli records, released ``successes`` (Bernstein & Sheldon 2018, Sec. 3.2, 4).

Model: x_i ~ Bernoulli(p), p ~ Beta(alpha, beta); release y = sum x_i + Laplace(1/eps)
(sensitivity 1, Sec. 3.1).  Output variable ``p``.  Methods: ``gibbs-ss`` (Algorithm 1,
auto), ``naive``, ``non-private`` (simulations only), ``ops`` (one-posterior sampling).
"""

from __future__ import annotations

from . import Family, prior_moments
from ._expfam import (COUNT_MECHANISMS, ENGINE_KEYS, auto_for_noise, BinomialRelease, curate_binomial, family_methods,
                      parse_beta_prior, simulate_binomial)

FAMILY = Family(
    name="binomial",
    release_model=BinomialRelease,
    methods=family_methods(ops=True, exact=True),
    auto_method="gibbs-ss",
    auto_rule=auto_for_noise,
    mechanisms=COUNT_MECHANISMS,
    parse_prior=parse_beta_prior,
    curate=curate_binomial,
    analysis_keys=ENGINE_KEYS | {"tail_mass"},
    naive_method="naive",
    description="Bernoulli records, Laplace-noised count of successes (Bernstein & Sheldon 2018)",
    simulate=simulate_binomial,
)

# data-augmentation MCMC (Ju et al. 2022) on this family's record model (families/da_models.py, issue 13)
FAMILY.methods["da-mcmc"] = "dpposterior.inference.da_mcmc:da_mcmc"
FAMILY.analysis_keys = frozenset(FAMILY.analysis_keys) | {"record_sweeps", "theta_steps", "thin"}

# the prior's moments in the posterior's variables, for the prior-equals-posterior check (issue 32)
FAMILY.hooks["prior_moments"] = prior_moments.beta_p
