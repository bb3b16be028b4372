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

``clt`` is the engine at its default (plug-in) covariance, ``clt-scaled`` with ``covariance = "scaled"``,
``clt-reweighted`` with ``covariance = "reweighted"``.

    python benchmarks/marginals_clt_sparse.py --seeds 1 2 --methods clt da \
        --out benchmarks/results/marginals_clt_sparse.json
    python benchmarks/marginals_clt_sparse.py --seeds 1 2 --methods clt-scaled \
        --da-from benchmarks/results/marginals_clt_sparse.json --out benchmarks/results/marginals_clt_sparse_scaled.json
    python benchmarks/marginals_clt_sparse.py --seeds 1 2 --methods clt-reweighted \
        --da-from benchmarks/results/marginals_clt_sparse.json \
        --out benchmarks/results/marginals_clt_sparse_reweighted.json
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from marginals_clt_error import batch_means  # noqa: E402
from marginals_clt_oneway import ENGINES, max_rhat, parse, reweighting_diagnostics, run_seeds  # noqa: E402

ATTRS = ("capital-gain", "income>50K")


#: da's numbers by seed, from ``--da-from`` (an earlier run's results) where da is not run
DA_FROM: dict = {}


def one(df, seed: int, rho: float, draws: int, warmup: int, methods) -> dict:
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
    found = {}
    for method in methods:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = dpposterior.infer(rel, draws=draws, warmup=warmup, seed=seed, quiet=True, **ENGINES[method])
        row[f"{method}_seconds"] = time.perf_counter() - t0
        row[f"{method}_max_rhat"] = max_rhat(post)
        row.update({f"{method}_{k}": v for k, v in reweighting_diagnostics(post).items()})
        for key, attr, cell in (("big", "capital-gain", big), ("high_income", "income>50K", 1)):
            found[method, key] = batch_means(n * np.asarray(post.marginal([attr]), float)[..., cell])
    if "da" not in methods:
        if seed not in DA_FROM:
            raise SystemExit(f"marginals_clt_sparse: no da result for seed {seed}: add da to --methods or give "
                             "--da-from")
        row["da_max_rhat"] = DA_FROM[seed]["da_max_rhat"]
    for key in ("big", "high_income"):
        if "da" in methods:
            mb, eb, sb = found["da", key]
        else:  # an earlier run's da; its MC error bounded by that run's error of the difference (over-stated)
            old = DA_FROM[seed][key]
            mb, sb = old["da_mean"], old["da_sd"]
            eb = old["da_mc"] if "da_mc" in old else old["mc_sd"] * sb
        row[key] = {"da_mean": float(mb), "da_sd": float(sb), "da_mc": float(eb)}
        for method in methods:
            if method == "da":
                continue
            ma, ea, sa = found[method, key]
            prefix = "" if method == "clt" else f"{method}_"
            row[key].update({f"{prefix}clt_mean": float(ma), f"{prefix}clt_sd": float(sa),
                             f"{prefix}clt_mc": float(ea), f"{prefix}diff_sd": float((ma - mb) / sb),
                             f"{prefix}mc_sd": float(np.hypot(ea, eb) / sb)})
    return row


def show(r: dict) -> None:
    print(f"seed {r['seed']} (sigma {', '.join(f'{s:.1f}' for s in r['sigma'])}; max R-hat "
          + ", ".join(f"{m} {r[m + '_max_rhat']:.3f}" for m in ENGINES if m + "_max_rhat" in r) + "):", flush=True)
    for key, label in (("big", "largest capital-gain level"), ("high_income", "income>50K")):
        c = r[key]
        for prefix, name in (("", "clt"), ("clt-scaled_", "clt-scaled"), ("clt-exact_", "clt-exact"),
                             ("clt-reweighted_", "clt-reweighted")):
            if prefix + "clt_mean" in c:
                print(f"  {label}: {name} {c[prefix + 'clt_mean']:.1f} (sd {c[prefix + 'clt_sd']:.1f}), da "
                      f"{c['da_mean']:.1f} (sd {c['da_sd']:.1f}): {c[prefix + 'diff_sd']:+.3f} da sds (MC error "
                      f"{c[prefix + 'mc_sd']:.3f})", flush=True)


def main(argv=None) -> None:
    args = parse(__doc__, argv, seeds=[1, 2], rho=1.056e-3, rho_of="the three tables together", draws=1000,
                 warmup=500, da_from=True)
    if args.da_from is not None:
        earlier = json.loads(args.da_from.read_text())
        if (earlier["rho"], earlier["draws"], earlier["warmup"]) != (args.rho, args.draws, args.warmup):
            raise SystemExit("marginals_clt_sparse: --da-from was run at another rho, draws or warm-up")
        DA_FROM.update({r["seed"]: r for r in earlier["rows"]})
    run_seeds(args, one, show)


if __name__ == "__main__":
    main()
