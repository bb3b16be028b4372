"""The census SBC's ranks and the draws' ESS at a given thinning (docs/census.md, "Simulation-based
calibration"): why the slow study keeps every 20th sweep.

    python benchmarks/census_sbc_thinning.py --thin 5 --trials 300     # chi-square p and rank histogram per quantity
    python benchmarks/census_sbc_thinning.py --thin 5 --ess 30         # median and least ESS over 30 releases

The releases, chains and ranks are those of ``tests/test_census.py`` (``_sbc_ranks``, seeds 0, 1, ...), so the
p-values at ``--thin 20 --trials 300`` are those of its slow test.
"""
from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _ranks(args):
    import test_census as tc

    seed, thin = args
    return tc._sbc_ranks(seed, thin=thin)


def _draws(seed: int, thin: int) -> dict:
    import test_census as tc
    from dpposterior.families.census import CensusPrior
    from dpposterior.inference import census_da as cd

    s, _, _, _ = tc._sbc_release(seed)  # the release, options and chain of _sbc_ranks(seed, thin=thin)
    opts = cd.CensusDAOptions(draws=100, warmup=300, thin=thin, chains=1, seed=seed)
    cx, h, _, pi = cd._run_chain(cd.Problem(s, CensusPrior()), opts, np.random.SeedSequence(seed))
    return {"tract total": s.aggregate(cx, "tract", "total")[:, 0, 0], "block cell": cx[:, 0, 0], "tau": h[:, 2],
            "mix shape": h[:, 3], "tract mix": pi[:, 0, 0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--thin", type=int, default=5)
    ap.add_argument("--trials", type=int, default=0, help="releases to rank (0: none)")
    ap.add_argument("--ess", type=int, default=0, help="releases whose draws' ESS to report (0: none)")
    args = ap.parse_args()
    import test_census as tc

    if args.trials:
        with ProcessPoolExecutor(2) as ex:
            ranks = np.array(list(ex.map(_ranks, [(s, args.thin) for s in range(args.trials)], chunksize=10)))
        for j, name in enumerate(tc.SBC_NAMES):
            hist = np.histogram(ranks[:, j], bins=10, range=(0, 101))[0]
            print(f"{name:12s} p = {tc._uniform_p(ranks[:, j], 100, bins=10):.4f}  ranks by bin {hist.tolist()}")
    if args.ess:
        from dpposterior.convergence import ess_bulk

        out: dict[str, list[float]] = {}
        for seed in range(args.ess):
            for k, v in _draws(seed, args.thin).items():
                out.setdefault(k, []).append(ess_bulk(np.asarray(v, float)[None, :]))
        for k, v in out.items():
            print(f"{k:12s} bulk ESS of 100 draws: median {np.median(v):.0f}, least {np.min(v):.0f}")


if __name__ == "__main__":
    main()
