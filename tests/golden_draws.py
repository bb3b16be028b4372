"""Fixed-seed draws of a few engines, stored so that a refactor can be shown to change no number.

``python tests/golden_draws.py`` rewrites ``tests/data/golden_draws.npz`` -- do it only for a
deliberate numerical change, and say so in the commit.  ``tests/test_bit_identical.py`` recomputes
every case and compares bit for bit.  Every option is explicit, so a change of a default does not
show up here (that is a numerical change of its own, tested where it is made).
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np

GOLDEN = pathlib.Path(__file__).parent / "data" / "golden_draws.npz"

#: (case name, family, method, n, epsilon, engine options); every case is a release simulated from
#: the family's default prior with a fixed seed, then analysed with a fixed seed
CASES = [
    ("gaussian-gibbs", "gaussian", "gibbs", 50, 1.0, dict(draws=200, warmup=100, chains=2)),
    ("gaussian-grid", "gaussian", "grid", 50, 1.0, dict(draws=200, chains=2)),
    ("gaussian-da-mcmc", "gaussian", "da-mcmc", 50, 1.0, dict(draws=200, warmup=100, chains=2)),
    ("binomial-gibbs-ss", "binomial", "gibbs-ss", 100, 1.0, dict(draws=200, warmup=100, chains=2)),
    ("poisson-gibbs-ss", "poisson", "gibbs-ss", 100, 1.0, dict(draws=200, warmup=100, chains=2)),
    ("multinomial-naive", "multinomial", "naive", 100, 1.0, dict(draws=200, chains=2)),
    ("naive-bayes-vb", "naive-bayes", "vb", 200, 1.0, dict(draws=200, chains=2)),
    ("linreg-fixeds", "linear-regression", "mcmc-fixeds", 200, 1.0, dict(draws=200, warmup=100, chains=2)),
    ("linreg-normalx", "linear-regression", "mcmc-normalx", 200, 1.0, dict(draws=100, warmup=100, chains=2)),
    ("linreg-fast", "linear-regression", "bayes-fixeds-fast", 200, 1.0, dict(draws=200, chains=2)),
    ("linreg-ju-smc-abc", "linreg-ju", "smc-abc", 100, 10.0,
     dict(draws=200, chains=1, simulations=400, particles=200)),
    ("linreg-ju-sppe", "linreg-ju", "sppe", 100, 10.0,
     dict(draws=200, chains=1, simulations=200, rounds=1, rqmc_points=2, max_epochs=3, batch_size=50,
          num_atoms=5, proposal="atomic", device="cpu", training="paper", correction="none")),
    ("linreg-ju-sppe-importance", "linreg-ju", "sppe", 100, 1.0,
     dict(draws=200, chains=1, simulations=200, rounds=2, rqmc_points=2, max_epochs=3, batch_size=50,
          num_atoms=5, proposal="atomic", device="cpu", training="fast", correction="importance")),
    ("loglinear-sple", "loglinear", "sple", 100, 10.0,
     dict(draws=100, chains=1, simulations=200, rounds=1, rqmc_points=2, max_epochs=3, device="cpu")),
]

#: calibration studies through the families' batched paths (the `dpposterior calibrate` route)
STUDIES = [
    ("calibrate-gaussian", "gaussian", ["gibbs"], 30, 1.0, 4),
    ("calibrate-poisson", "poisson", ["gibbs-ss", "naive"], 30, 1.0, 4),
    ("calibrate-linreg", "linear-regression", ["mcmc-fixeds"], 100, 1.0, 3),
]


def case_draws(family_name, method, n, epsilon, options, seed=20261123) -> np.ndarray:
    from dpposterior import infer
    from dpposterior.families import get_family

    family = get_family(family_name)
    rng = np.random.default_rng(seed)
    prior = family.parse_prior(None, None)
    sim = family.simulate(prior, n, epsilon, rng)
    post = infer(sim.release, None, method, seed=seed + 1, **options)
    return np.concatenate([np.asarray(post.posterior[k], float).reshape(-1) for k in sorted(post.posterior)])


def study_ranks(family_name, methods, n, epsilon, trials) -> np.ndarray:
    from dpposterior.diagnostics.calibration import calibrate

    out = calibrate(family_name, n, epsilon, trials, methods=methods, seed=7, draws=100, return_ranks=True)
    ranks = out["_ranks"]
    return np.concatenate([np.asarray(ranks[m], float).reshape(-1) for m in methods])


def compute_all() -> dict[str, np.ndarray]:
    out = {}
    for name, family, method, n, eps, options in CASES:
        out[name] = case_draws(family, method, n, eps, options)
    for name, family, methods, n, eps, trials in STUDIES:
        out[name] = study_ranks(family, methods, n, eps, trials)
    return out


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    arrays = compute_all()
    GOLDEN.parent.mkdir(exist_ok=True)
    np.savez_compressed(GOLDEN, **arrays)
    for k, v in arrays.items():
        print(k, v.shape, float(np.sum(v)))
    sys.exit(0)
