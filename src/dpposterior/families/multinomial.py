"""Family ``multinomial``: categorical records, released ``counts`` (Bernstein & Sheldon 2018, Sec. 3.2, 4).

Model: x_i ~ Categorical(p), p ~ Dirichlet(alpha); release y = counts + Laplace(2/eps) per
category (L1 sensitivity 2: changing one record moves two counts by one).  Output
variable ``p`` with dim ``category``.  Methods: ``gibbs-ss`` (Algorithm 1, auto),
``naive``, ``non-private`` (simulations only).
"""

from __future__ import annotations

from . import Family, prior_moments
from ._expfam import (COUNT_MECHANISMS, ENGINE_KEYS, auto_for_noise, MultinomialRelease, curate_multinomial, family_methods,
                      parse_dirichlet_prior, simulate_multinomial)

FAMILY = Family(
    name="multinomial",
    release_model=MultinomialRelease,
    methods=family_methods(exact=True),
    auto_method="gibbs-ss",
    auto_rule=auto_for_noise,
    mechanisms=COUNT_MECHANISMS,
    parse_prior=parse_dirichlet_prior,
    curate=curate_multinomial,
    analysis_keys=ENGINE_KEYS | {"tail_mass"},
    naive_method="naive",
    description="categorical records, Laplace-noised counts per category (Bernstein & Sheldon 2018)",
    simulate=simulate_multinomial,
)

# data-augmentation MCMC (Ju et al. 2022) on this family's record model (families/da_models.py, issue 13)
FAMILY.methods["da-mcmc"] = "dpposterior.inference.da_mcmc:da_mcmc"
FAMILY.analysis_keys = frozenset(FAMILY.analysis_keys) | {"record_sweeps", "theta_steps", "thin"}

# the prior's moments in the posterior's variables, for the prior-equals-posterior check (issue 32)
FAMILY.hooks["prior_moments"] = prior_moments.dirichlet_p
