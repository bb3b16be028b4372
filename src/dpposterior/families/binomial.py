"""Family ``binomial``: Bernoulli records, released ``successes`` (Bernstein & Sheldon 2018, Sec. 3.2, 4).

Model: x_i ~ Bernoulli(p), p ~ Beta(alpha, beta); release y = sum x_i + Laplace(1/eps)
(sensitivity 1, Sec. 3.1).  Output variable ``p``.  Methods: ``gibbs-ss`` (Algorithm 1,
auto), ``naive``, ``non-private`` (simulations only), ``ops`` (one-posterior sampling).
"""

from __future__ import annotations

import numpy as np

from . import Family, prior_moments
from ._expfam import (AUTO_ORDER, COUNT_MECHANISMS, auto_for_noise, BinomialRelease, curate_binomial,
                      expfam_observation_model, family_methods, parse_beta_prior, simulate_binomial)
from ..observation import ENUMERATE, MOMENTS, RECORDS, SIMULATE, ObservationModel

def da_model(release, prior):
    """The record model of data-augmentation MCMC (``da-mcmc``; Ju, Awan, Gong & Rao 2022): ``(Model, observed)``."""
    from scipy import stats

    from ..model import Model

    prior = parse_beta_prior(prior)
    a, b, n = float(prior.alpha), float(prior.beta), release.n

    def complete_posterior(x, rng):
        k = float(x.sum())
        return {"p": rng.beta(a + k, b + n - k)}

    model = Model(params={"p": stats.beta(a, b)},
                  records=lambda theta, size, rng: (rng.random(size) < theta["p"]).astype(np.float64),
                  statistic=lambda x: x, mechanism=release.mechanism,  # whatever noise the release states
                  n=n, complete_posterior=complete_posterior,
                  record_logpdf=lambda x, theta: stats.bernoulli.logpmf(x, theta["p"]), name="binomial")
    return model, release.released


def observation_model(release: BinomialRelease, prior=None) -> ObservationModel:
    """The release as one measurement, the noisy count of successes among n Bernoulli records; variable ``p``.

    Its latent statistic offers records (``da-mcmc``), enumeration (``exact``), moments and simulation."""
    return expfam_observation_model(release, parse_beta_prior(prior, release),
                                    {RECORDS, ENUMERATE, MOMENTS, SIMULATE})


FAMILY = Family(
    name="binomial",
    release_model=BinomialRelease,
    methods=family_methods(ops=True, exact=True, da_mcmc=True),
    auto_method="gibbs-ss",
    auto_rule=auto_for_noise,
    auto_order=AUTO_ORDER,
    mechanisms=COUNT_MECHANISMS,
    simulate_mechanisms=COUNT_MECHANISMS,
    simulates_integer_noise=True,
    parse_prior=parse_beta_prior,
    curate=curate_binomial,
    naive_method="naive",
    description="Bernoulli records, Laplace-noised count of successes (Bernstein & Sheldon 2018)",
    hooks={"da_model": da_model, "observation_model": observation_model},
    simulate=simulate_binomial,
)

# the prior's moments in the posterior's variables, for the prior-equals-posterior check
FAMILY.hooks["prior_moments"] = prior_moments.beta_p
