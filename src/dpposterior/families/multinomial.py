"""Family ``multinomial``: categorical records, released ``counts`` (Bernstein & Sheldon 2018, Sec. 3.2, 4).

Model: x_i ~ Categorical(p), p ~ Dirichlet(alpha); release y = counts + Laplace(2/eps) per
category (L1 sensitivity 2: changing one record moves two counts by one).  Output
variable ``p`` with dim ``category``.  Methods: ``gibbs-ss`` (Algorithm 1, auto),
``naive``, ``non-private`` (simulations only).
"""

from __future__ import annotations

import numpy as np

from . import Family, prior_moments
from ._expfam import (AUTO_ORDER, COUNT_MECHANISMS, auto_for_noise, MultinomialRelease, curate_multinomial,
                      expfam_observation_model, family_methods, parse_dirichlet_prior, simulate_multinomial)
from ..observation import ENUMERATE, MOMENTS, RECORDS, SIMULATE, ObservationModel

def da_model(release, prior):
    """The record model of data-augmentation MCMC (``da-mcmc``; Ju, Awan, Gong & Rao 2022): ``(Model, observed)``."""
    from scipy import stats

    from ..model import Model
    from .naive_bayes import dirichlet_draw

    counts = release.released
    k = counts.size
    alpha = parse_dirichlet_prior(prior).vector(k)
    n = release.n
    eye = np.eye(k)

    def records(theta, size, rng):
        cum = np.cumsum(theta["p"])
        return np.minimum(np.searchsorted(cum, rng.random(size) * cum[-1], side="right"), k - 1)

    def complete_posterior(x, rng):
        return {"p": dirichlet_draw(alpha + np.bincount(x, minlength=k), rng)}

    model = Model(params={"p": stats.dirichlet(alpha)}, records=records, statistic=lambda x: eye[x],
                  mechanism=release.mechanism, n=n, complete_posterior=complete_posterior,
                  name="multinomial", dims={"p": ["category"]}, coords={"category": release.category_labels})
    return model, counts


def observation_model(release: MultinomialRelease, prior=None) -> ObservationModel:
    """The release as one measurement, the noisy counts of n categorical records per category; variable ``p``
    (dim ``category``, labelled by the release's categories).

    Its latent statistic offers records (``da-mcmc``), enumeration (``exact``), moments and simulation."""
    return expfam_observation_model(release, parse_dirichlet_prior(prior, release),
                                    {RECORDS, ENUMERATE, MOMENTS, SIMULATE})


FAMILY = Family(
    name="multinomial",
    release_model=MultinomialRelease,
    methods=family_methods(exact=True, da_mcmc=True),
    auto_method="gibbs-ss",
    auto_rule=auto_for_noise,
    auto_order=AUTO_ORDER,
    mechanisms=COUNT_MECHANISMS,
    simulate_mechanisms=COUNT_MECHANISMS,
    simulates_integer_noise=True,
    parse_prior=parse_dirichlet_prior,
    curate=curate_multinomial,
    naive_method="naive",
    description="categorical records, Laplace-noised counts per category (Bernstein & Sheldon 2018)",
    hooks={"da_model": da_model, "draw_values": lambda release: int(np.size(release.statistics.counts.value)),
           "observation_model": observation_model},
    simulate=simulate_multinomial,
)

# the prior's moments in the posterior's variables, for the prior-equals-posterior check
FAMILY.hooks["prior_moments"] = prior_moments.dirichlet_p
