"""How the small-area sampler mixes with ``likelihood = "binomial"`` against the Poisson default, and what that
does to a rank (SBC) test (docs/small-area.md, "Validation").

The ``sbc`` part reuses the SBC helpers of tests/test_small_area.py, which import pytest: install the test
extra first (``pip install -e ".[test]"``).  The ``ess`` part needs only the package.  Prints only; writes
no file.

* ``ess`` -- bulk ESS per draw of alpha_1 and tau, one chain of 500 + 2,000 iterations on 20 simulated tables
  each (G = 15, C = 2, sigma = 6): Poisson with exposures 1-8 and alpha ~ N(1, 1); binomial with 5-30 at risk
  and alpha ~ N(-1, 1) -- the two regimes of tests/test_small_area.py's SBC tests.
* ``sbc`` -- the binomial SBC of alpha and tau (tests/test_small_area.py's ``_sbc``) for the given seeds,
  draws (thinned to 99) and trials: chi-square p of the rank histograms and the rates' 90% coverage.

    python benchmarks/small_area_binomial_mixing.py ess
    python benchmarks/small_area_binomial_mixing.py sbc --seed 21 --trials 150 --draws 990 4950 9900
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))


def ess() -> None:
    import dpposterior as dp
    from dpposterior.convergence import ess_bulk
    from dpposterior.families.small_area import SmallAreaPrior, simulate

    for lik in ("poisson", "binomial"):
        prior = SmallAreaPrior(alpha_mean=-1.0 if lik == "binomial" else 1.0, alpha_sd=1.0, tau_scale=1.0)
        ea, et = [], []
        for k in range(20):
            rng = np.random.default_rng([5, k])
            exposure = rng.integers(5, 31, size=15) if lik == "binomial" else rng.uniform(1.0, 8.0, size=15)
            truth, release = simulate(prior, 15, 2, 6.0, rng, exposure=exposure, likelihood=lik)
            extra = {"likelihood": "binomial"} if lik == "binomial" else {}
            post = dp.infer(release, prior=prior.model_dump(exclude={"kind"}), seed=k, draws=2000, warmup=500,
                            chains=1, **extra)
            ea.append(ess_bulk(post.posterior["alpha"][:, :, 0]) / 2000)
            et.append(ess_bulk(post.posterior["tau"]) / 2000)
        print(f"{lik}: bulk ESS per draw, alpha_1 median {np.median(ea):.3f} (min {np.min(ea):.3f}), "
              f"tau median {np.median(et):.3f} (min {np.min(et):.3f})", flush=True)


def sbc(seed: int, trials: int, draws_list) -> None:
    try:
        import test_small_area as t
    except ModuleNotFoundError as err:
        if err.name != "pytest":
            raise
        raise SystemExit("the sbc part reuses tests/test_small_area.py, which needs pytest: "
                         "pip install -e '.[test]'") from None

    for draws in draws_list:
        start = time.time()
        ranks, cover = t._sbc("exact-da", likelihood="binomial", trials=trials, seed=seed, draws=draws,
                              warmup=1000 if draws > 990 else 300)
        print(f"seed {seed}, {trials} trials, {draws} draws thinned to 99: alpha p = {t._p(ranks['alpha']):.4f}, "
              f"tau p = {t._p(ranks['tau']):.4f}, coverage {cover:.3f} ({time.time() - start:.0f} s)", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", choices=["ess", "sbc"])
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--trials", type=int, default=150)
    ap.add_argument("--draws", type=int, nargs="+", default=[990])
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")  # each short chain's ESS warnings: the point here is the ESS itself
    if args.part == "ess":
        ess()
    else:
        sbc(args.seed, args.trials, args.draws)


if __name__ == "__main__":
    main()
