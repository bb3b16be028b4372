"""A user model for ``dpposterior infer --model examples/models/poisson_counts.py:model``.

n = 200 counts x_i ~ Poisson(lam), lam ~ Gamma(2, scale 2); each count clamped to [0, 10] and
summed; the sum released with Laplace noise (epsilon 0.5, sensitivity 10).  The issue-13
contract model (docs/models.md).
"""

import numpy as np
import scipy.stats as st

import dpposterior
from dpposterior.mechanisms import Laplace

model = dpposterior.Model(
    params={"lam": st.gamma(2.0, scale=2.0)},
    records=lambda theta, size, rng: rng.poisson(theta["lam"], size=size),
    statistic=lambda rec: np.clip(rec, 0, 10),
    mechanism=Laplace(epsilon=0.5, sensitivity=10.0),
    n=200,
    record_logpdf=lambda rec, theta: st.poisson.logpmf(rec, theta["lam"]),
)
