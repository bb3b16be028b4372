"""The ``marginals`` family's ``clt`` engine against its exact engine ``da`` where a margin sums many sparse cells:
Adult's capital-gain (100 levels, one holding 92% of the records, 77 of the rest empty) by income, its
records as they are (``../shared/data/adult/adult.csv``), the capital-gain, income and (capital-gain, income)
tables released by the package's curator with discrete Gaussian noise at about the per-cell sigma of the
14-attribute MST release at epsilon 1 (docs/benchmarks.md).  ``da`` is the exact engine (on the one-way table it
matches an exact reference: ``benchmarks/marginals_clt_oneway.py``), so a difference beyond the Monte Carlo error
is the central-limit likelihood's where ``da``'s chains have mixed (its R-hat is printed).  Printed per seed: the
posterior mean and sd of the largest capital-gain level's count and of the income>50K count under each engine,
their difference in ``da`` sds, the Monte Carlo error of that difference (batch means) and each engine's largest
R-hat.

    python benchmarks/marginals_clt_sparse.py --seeds 1 2 --out benchmarks/results/marginals_clt_sparse.json
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from marginals_clt_error import batch_means  # noqa: E402
from marginals_clt_oneway import max_rhat, parse, run_seeds  # noqa: E402

ATTRS = ("capital-gain", "income>50K")


def one(df, seed: int, rho: float, draws: int, warmup: int) -> dict:
    import dpposterior

    domain = {a: list(range(int(df[a].max()) + 1)) for a in ATTRS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = dpposterior.release_from_csv(df[list(ATTRS)], "marginals", cliques=";".join([",".join(ATTRS), *ATTRS]),
                                           mechanism="discrete-gaussian", rho=rho, seed=seed,
                                           extra={"domain": domain})
    n = float(len(df))
    big = int(np.bincount(df["capital-gain"]).argmax())
    row = {"seed": seed, "sigma": [float(m.sigma) for m in rel.measurements]}
    for method in ("clt", "da"):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = dpposterior.infer(rel, method=method, draws=draws, warmup=warmup, seed=seed, quiet=True)
        row[f"{method}_seconds"] = time.perf_counter() - t0
        row[f"{method}_max_rhat"] = max_rhat(post)
        for key, attr, cell in (("big", "capital-gain", big), ("high_income", "income>50K", 1)):
            x = n * np.asarray(post.marginal([attr]), float)[..., cell]
            row[f"{method}_{key}"] = batch_means(x)
    for key in ("big", "high_income"):
        (ma, ea, sa), (mb, eb, sb) = row.pop(f"clt_{key}"), row.pop(f"da_{key}")
        row[key] = {"clt_mean": float(ma), "clt_sd": float(sa), "da_mean": float(mb), "da_sd": float(sb),
                    "diff_sd": float((ma - mb) / sb), "mc_sd": float(np.hypot(ea, eb) / sb)}
    return row


def show(r: dict) -> None:
    print(f"seed {r['seed']} (sigma {', '.join(f'{s:.1f}' for s in r['sigma'])}; max R-hat clt "
          f"{r['clt_max_rhat']:.3f}, da {r['da_max_rhat']:.3f}):", flush=True)
    for key, label in (("big", "largest capital-gain level"), ("high_income", "income>50K")):
        c = r[key]
        print(f"  {label}: clt {c['clt_mean']:.1f} (sd {c['clt_sd']:.1f}), da {c['da_mean']:.1f} "
              f"(sd {c['da_sd']:.1f}): {c['diff_sd']:+.3f} da sds (MC error {c['mc_sd']:.3f})", flush=True)


def main(argv=None) -> None:
    args = parse(__doc__, argv, seeds=[1, 2], rho=1.056e-3, rho_of="the three tables together", draws=1000,
                 warmup=500)
    run_seeds(args, one, show)


if __name__ == "__main__":
    main()
