"""The ``marginals`` engines ``clt`` and ``da`` against the exact posterior of one sparse one-way table: Adult's
capital-gain (100 levels; 92% of the 48,842 records in one, 77 of the other 99 empty), released by the package's
curator with discrete Gaussian noise (sigma about 53 per cell, the 14-attribute MST release's at epsilon 1).

The reference is exact, with no sampling.  With one clique of K cells and the default prior (concentration
A = K: alpha = 1 on every cell) the Dirichlet-multinomial law of the true counts T is uniform over the tables of n
records, so the posterior of T is the product of the cells' discrete Gaussian likelihoods exp(-(y_i - t_i)^2 /
(2 sigma^2)) over t_i >= 0, conditioned on sum_i t_i = n.  The law of the other cells' sum is their truncated
laws' convolution (checked first against a sum over every table on two small cases); T_0 (the largest level) is n
minus that sum, weighted by its own likelihood.  The engines' draws are of p, and E[n p_0] = n (E[T_0] + 1) /
(n + A), with the Dirichlet's variance added to T_0's.

Printed per seed: the reference mean and sd of n p_0 and each engine's difference from it in reference sds, with
its Monte Carlo error (batch means) and R-hat.  ``clt`` is the engine at its default (plug-in) covariance,
``clt-scaled``, ``clt-exact`` and ``clt-reweighted`` with ``covariance = "scaled"``, ``"exact"`` and
``"reweighted"``.

    python benchmarks/marginals_clt_oneway.py --seeds 1 2 3 --methods clt da \
        --out benchmarks/results/marginals_clt_oneway.json
    python benchmarks/marginals_clt_oneway.py --seeds 1 2 3 --methods clt-scaled \
        --out benchmarks/results/marginals_clt_oneway_scaled.json
    python benchmarks/marginals_clt_oneway.py --seeds 1 --methods clt-exact \
        --out benchmarks/results/marginals_clt_oneway_exact.json
    python benchmarks/marginals_clt_oneway.py --seeds 1 2 3 --methods clt-reweighted \
        --out benchmarks/results/marginals_clt_oneway_reweighted.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from marginals_clt_error import batch_means  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult" / "adult.csv"
ATTR = "capital-gain"


def exact_big_cell(y: np.ndarray, sigma: float, n: int, big: int) -> tuple[float, float]:
    """Mean and sd of n p_big under the uniform Dirichlet (alpha = 1 a cell) and discrete Gaussian noise."""
    k = len(y)
    law = np.ones(1)
    for i in range(k):
        if i == big:
            continue
        t = np.arange(0, max(int(y[i] + 12 * sigma), 1) + 1)
        w = np.exp(-0.5 * ((y[i] - t) / sigma) ** 2)
        # direct convolution, not FFT: the sum the likelihood selects lies dozens of orders of magnitude into the
        # law's tail (the truncated cells sum to far more than the noisy total), below an FFT's rounding floor
        law = np.convolve(law, w / w.sum())
        law = law / law.sum()
    s = np.arange(len(law))
    t0 = n - s
    with np.errstate(divide="ignore"):
        log_w = np.log(law) - 0.5 * ((y[big] - t0) / sigma) ** 2
    log_w[t0 < 0] = -np.inf
    if not np.isfinite(log_w.max()):
        raise SystemExit("marginals_clt_oneway: the reference's weights underflowed")
    w = np.exp(log_w - log_w.max())
    w = w / w.sum()
    a = t0 + 1.0  # p_big | T ~ Beta(T_big + 1, n + K - T_big - 1)
    b = n + k - a
    mean_p = np.sum(w * a / (a + b))
    second_p = np.sum(w * (a * (a + 1)) / ((a + b) * (a + b + 1)))
    return float(n * mean_p), float(n * np.sqrt(second_p - mean_p ** 2))


def enumeration_reference(y: np.ndarray, sigma: float, n: int) -> tuple[float, float]:
    """Mean and sd of n p_0 by a sum over every table of n records (small cases only): what
    :func:`exact_big_cell` is checked against."""
    import itertools

    k = len(y)
    log_weights, first, second = [], [], []
    for t in itertools.product(range(n + 1), repeat=k):
        if sum(t) == n:
            a, b = t[0] + 1.0, n + k - t[0] - 1.0
            log_weights.append(-0.5 * np.sum(((y - np.array(t)) / sigma) ** 2))
            first.append(a / (a + b))
            second.append(a * (a + 1) / ((a + b) * (a + b + 1)))
    w = np.exp(np.array(log_weights) - max(log_weights))
    w = w / w.sum()
    mean_p, second_p = float(w @ np.array(first)), float(w @ np.array(second))
    return n * mean_p, n * float(np.sqrt(second_p - mean_p ** 2))


#: the reference's self-check (y, sigma, n): noisy cells that agree with n, and a total the likelihood selects far
#: in the other cells' law's tail (where an FFT convolution is off by 17%)
CHECK_CASES = ((np.array([7.0, -1.0, 4.0]), 2.0, 9), (np.array([10.0, 3, 3, 3, 3, 3]), 0.6, 10))


def check_against_enumeration() -> None:
    """:func:`exact_big_cell` against :func:`enumeration_reference` on :data:`CHECK_CASES`."""
    for y, sigma, n in CHECK_CASES:
        got, want = np.array(exact_big_cell(y, sigma, n, 0)), np.array(enumeration_reference(y, sigma, n))
        if not np.allclose(got, want, rtol=1e-9):
            raise SystemExit(f"marginals_clt_oneway: the reference {got} is not the enumeration's {want}")


#: the engines compared, by the name they are printed under: clt with each covariance, and da
ENGINES = {"clt": {"method": "clt"}, "clt-scaled": {"method": "clt", "covariance": "scaled"},
           "clt-exact": {"method": "clt", "covariance": "exact"},
           "clt-reweighted": {"method": "clt", "covariance": "reweighted"}, "da": {"method": "da"}}


def one(df, seed: int, rho: float, draws: int, warmup: int, methods) -> dict:
    import dpposterior

    k = int(df[ATTR].max()) + 1
    big = int(np.bincount(df[ATTR], minlength=k).argmax())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = dpposterior.release_from_csv(df[[ATTR]], "marginals", cliques=ATTR, mechanism="discrete-gaussian",
                                           rho=rho, seed=seed, extra={"domain": {ATTR: list(range(k))}})
    meas = rel.measurements[0]
    y, sigma, n = np.asarray(meas.array(), float).ravel(), float(meas.sigma), len(df)
    ref_mean, ref_sd = exact_big_cell(y, sigma, n, big)
    row = {"seed": seed, "sigma": sigma, "exact_mean": ref_mean, "exact_sd": ref_sd}
    for method in methods:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = dpposterior.infer(rel, draws=draws, warmup=warmup, seed=seed, quiet=True, **ENGINES[method])
        seconds = time.perf_counter() - t0
        x = n * np.asarray(post.marginal([ATTR]), float)[..., big]
        m, e, s = batch_means(x)
        row[method] = {"mean": float(m), "sd": float(s), "diff_sd": float((m - ref_mean) / ref_sd),
                       "mc_sd": float(e / ref_sd), "sd_ratio": float(s / ref_sd),
                       "max_rhat": max_rhat(post), "seconds": seconds,
                       **reweighting_diagnostics(post)}
    return row


def parse(doc: str, argv, *, seeds, rho: float, rho_of: str, draws: int, warmup: int, da_from: bool = False):
    """The options of this script and of ``marginals_clt_sparse.py``, with each one's defaults (``da_from``: the
    option ``--da-from``, da's numbers from an earlier run's results)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Private-PGM's adult.csv (default %(default)s)")
    ap.add_argument("--seeds", type=int, nargs="+", default=seeds)
    ap.add_argument("--rho", type=float, default=rho, help=f"zCDP rho of {rho_of} (default %(default)s: sigma "
                    "about 53 per cell)")
    ap.add_argument("--draws", type=int, default=draws)
    ap.add_argument("--warmup", type=int, default=warmup)
    ap.add_argument("--methods", nargs="+", choices=tuple(ENGINES), default=["clt", "clt-scaled", "da"],
                    help="the engines to run (default: %(default)s; clt is the plug-in covariance, clt-scaled, "
                         "clt-exact and clt-reweighted the others)")
    if da_from:
        ap.add_argument("--da-from", type=Path, default=None, help="without da in --methods: its numbers from this "
                        "earlier --out of the same seeds, rho, draws and warm-up")
    ap.add_argument("--out", type=Path, default=None)
    return ap.parse_args(argv)


def reweighting_diagnostics(post) -> dict:
    """The importance weights' diagnostics that ``clt``'s ``covariance = "reweighted"`` stores (attributes
    ``reweighting_*``); empty for any other posterior."""
    return {k: float(v) for k, v in post.attrs.items() if k.startswith("reweighting_")}


def max_rhat(post) -> float:
    import arviz as az

    return float(max(float(az.rhat(post.to_arviz())[v].max()) for v in post.posterior))


def run_seeds(args, one, show) -> None:
    """``one(df, seed, rho, draws, warmup, methods)`` for every seed, ``show`` printing each row; the rows to
    ``--out``."""
    import pandas as pd

    from _out import loadavg

    df = pd.read_csv(args.data)
    rows, load0, t0 = [], loadavg(), time.time()
    for seed in args.seeds:
        rows.append(one(df, seed, args.rho, args.draws, args.warmup, args.methods))
        show(rows[-1])
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "rho": args.rho, "draws": args.draws, "warmup": args.warmup,
                                        "methods": args.methods,
                                        "loadavg": [load0, loadavg()], "seconds": time.time() - t0}, indent=1))


def show(r: dict) -> None:
    print(f"seed {r['seed']} (sigma {r['sigma']:.1f}): exact n p_0 {r['exact_mean']:.1f} (sd {r['exact_sd']:.1f}); "
          + "; ".join(f"{m} {r[m]['diff_sd']:+.3f} sds (MC {r[m]['mc_sd']:.3f}, sd ratio {r[m]['sd_ratio']:.3f}, "
                      f"R-hat {r[m]['max_rhat']:.3f}, {r[m].get('seconds', float('nan')):.0f} s"
                      + (f", k-hat {r[m]['reweighting_pareto_k']:.2f}, ESS {r[m]['reweighting_ess']:.0f}, "
                         f"first-order shift {r[m].get('reweighting_first_order_shift', float('nan')):.2f} sd"
                         if "reweighting_pareto_k" in r[m] else "") + ")" for m in ENGINES
                      if m in r), flush=True)


def main(argv=None) -> None:
    args = parse(__doc__, argv, seeds=[1, 2, 3], rho=3.52e-4, rho_of="the table", draws=2000, warmup=1000)
    check_against_enumeration()
    run_seeds(args, one, show)


if __name__ == "__main__":
    main()
