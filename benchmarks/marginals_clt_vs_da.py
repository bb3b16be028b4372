"""The ``marginals`` family's ``clt`` engine (central-limit likelihood) against its exact engine ``da`` on one large
release: every cell of every measured table, and of unmeasured pairs, compared between the two posteriors.

``benchmarks/marginals_clt_error.py`` measures the approximation on a 12-cell domain where ``da`` mixes fast; this
script measures it where the claim is made, on posteriors saved by ``benchmarks/marginals_adult.py
--save-posterior DIR`` from the same release (the seed depends on (epsilon, repeat) alone, so a ``--method clt``
and a ``--method da`` run give the same release).  Per cell: the difference of the posterior means in units of
``da``'s posterior sd, its Monte Carlo error (batch means, both posteriors' errors combined), and the sd ratio
clt / da; grouped by the cell's expected count under ``da`` (n times its posterior mean), since the central limit
fails in cells of few records (docs/marginals.md, "Engines").  Batch means understate the error of chains that have
not mixed, so the reference's R-hat is printed beside.

    python benchmarks/marginals_adult.py --attributes 14 --epsilons 1 --max-cells 200 --method da --no-peer \\
        --timeout 5400 --save-posterior /tmp/adult14 --out /tmp/adult14/da.json
    python benchmarks/marginals_adult.py --attributes 14 --epsilons 1 --max-cells 200 --method clt --no-peer \\
        --warmup 1000 --save-posterior /tmp/adult14 --out /tmp/adult14/clt.json
    python benchmarks/marginals_clt_vs_da.py /tmp/adult14/clt_eps1_repeat0.nc /tmp/adult14/da_eps1_repeat0.nc \\
        --out benchmarks/results/marginals_adult_14_clt_vs_da_cap200.json
    python benchmarks/marginals_adult.py --attributes 14 --epsilons 1 --max-cells 200 --method clt --no-peer \
        --covariance reweighted --save-posterior /tmp/adult14rw \
        --out benchmarks/results/marginals_adult_14_clt_cap200_reweighted.json
    python benchmarks/marginals_clt_vs_da.py /tmp/adult14rw/clt_eps1_repeat0.nc /tmp/adult14/da_eps1_repeat0.nc \
        --out benchmarks/results/marginals_adult_14_clt_reweighted_vs_da_cap200.json

With ``covariance = "reweighted"`` the clt draws are a resample of an importance sample: batch means see the
repeats, but the Monte Carlo error of a weighted mean is nearer sd / sqrt(the weights' ESS), which the output records
(``clt_reweighting``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from marginals_clt_error import batch_means  # noqa: E402
from marginals_clt_oneway import reweighting_diagnostics  # noqa: E402

#: expected-count bands (records a cell holds under the reference posterior) the errors are grouped by
BANDS = ((0.0, 10.0), (10.0, 100.0), (100.0, 1000.0), (1000.0, math.inf))


def tables(tree, unmeasured: int) -> list[tuple[str, ...]]:
    """The junction tree's cliques (the measured tables of an MST selection), then up to ``unmeasured`` pairs in no
    clique, smallest tables first (ties by name)."""
    cliques = [tuple(c) for c in tree.cliques]
    covered = {frozenset(p) for c in cliques for p in itertools.combinations(c, 2)}
    pairs = [p for p in itertools.combinations(sorted(tree.sizes), 2) if frozenset(p) not in covered]
    pairs.sort(key=lambda p: (tree.sizes[p[0]] * tree.sizes[p[1]], p))
    return cliques + pairs[:unmeasured]


def rhat(x: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat of each cell (ArviZ), x of shape (chain, draw, cells)."""
    import arviz as az
    import xarray as xr

    return np.asarray(az.rhat(xr.Dataset({"x": (("chain", "draw", "cell"), x)}))["x"])


def compare(clt, da, attributes, n: float, batches: int) -> dict:
    a = np.asarray(clt.marginal(list(attributes)), float)
    b = np.asarray(da.marginal(list(attributes)), float)
    a = a.reshape(a.shape[0], a.shape[1], -1)
    b = b.reshape(b.shape[0], b.shape[1], -1)
    (ma, ea, sa), (mb, eb, sb) = batch_means(a, batches), batch_means(b, batches)
    return {"table": list(attributes), "err": np.abs(ma - mb) / sb, "mc": np.sqrt(ea ** 2 + eb ** 2) / sb,
            "ratio": sa / sb, "expected": n * mb, "rhat_da": rhat(b)}


def summary(rows: list[dict]) -> dict:
    err = np.concatenate([r["err"] for r in rows])
    mc = np.concatenate([r["mc"] for r in rows])
    ratio = np.concatenate([r["ratio"] for r in rows])
    expected = np.concatenate([r["expected"] for r in rows])
    rh = np.concatenate([r["rhat_da"] for r in rows])
    out = {"cells": int(err.size), "max_err_sd": float(err.max()), "mc_at_max": float(mc[err.argmax()]),
           "expected_at_max": float(expected[err.argmax()]), "median_err_sd": float(np.median(err)),
           "p90_err_sd": float(np.quantile(err, 0.9)), "median_mc_sd": float(np.median(mc)),
           "share_beyond_3mc": float(np.mean(err > 3 * mc)),
           "sd_ratio_p05_p95": np.quantile(ratio, [0.05, 0.95]).tolist(),
           "max_rhat_da": float(rh.max()), "bands": []}
    for lo, hi in BANDS:
        sel = (expected >= lo) & (expected < hi)
        if not sel.any():
            continue
        out["bands"].append({"expected_from": lo, "expected_to": hi, "cells": int(sel.sum()),
                             "median_err_sd": float(np.median(err[sel])), "max_err_sd": float(err[sel].max()),
                             "median_mc_sd": float(np.median(mc[sel])),
                             "share_beyond_3mc": float(np.mean(err[sel] > 3 * mc[sel])),
                             "sd_ratio_median": float(np.median(ratio[sel])),
                             "sd_ratio_p05_p95": np.quantile(ratio[sel], [0.05, 0.95]).tolist()})
    return out


def markdown(doc: dict) -> str:
    lines = ["| tables | cells | expected records a cell | median \\|Δmean\\| / sd | max | median MC error | "
             "beyond 3 MC errors | sd ratio clt / da, median (5–95%) |", "|---|---|---|---|---|---|---|---|"]
    for kind in ("measured", "unmeasured"):
        s = doc[kind]
        if not s:
            continue
        for b in s["bands"]:
            hi = "∞" if math.isinf(b["expected_to"]) else f"{b['expected_to']:,.0f}"
            lines.append(f"| {kind} | {b['cells']:,} | {b['expected_from']:,.0f}–{hi} | {b['median_err_sd']:.3f} | "
                         f"{b['max_err_sd']:.3f} | {b['median_mc_sd']:.3f} | {b['share_beyond_3mc']:.1%} | "
                         f"{b['sd_ratio_median']:.3f} "
                         f"({b['sd_ratio_p05_p95'][0]:.2f}–{b['sd_ratio_p05_p95'][1]:.2f}) |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("clt", type=Path, help="the clt posterior's netCDF")
    ap.add_argument("da", type=Path, help="the da posterior's netCDF (the reference)")
    ap.add_argument("--unmeasured", type=int, default=10, help="unmeasured pairs compared (default %(default)s)")
    ap.add_argument("--batches", type=int, default=20, help="batches a chain for the Monte Carlo error")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from dpposterior.posterior import Posterior

    clt, da = Posterior.read(args.clt), Posterior.read(args.da)
    if clt.attrs.get("release_sha256") != da.attrs.get("release_sha256"):
        sys.exit("marginals_clt_vs_da: the two posteriors are of different releases")
    n = float(da.attrs["n"])
    tree = da.junction_tree()
    names = tables(tree, args.unmeasured)
    measured = len(tree.cliques)
    rows = [compare(clt, da, t, n, args.batches) for t in names]
    doc = {"clt": str(args.clt), "da": str(args.da), "n": n, "release_sha256": da.attrs.get("release_sha256"),
           "draws": {"clt": [clt.nchains, clt.ndraws], "da": [da.nchains, da.ndraws]},
           "clt_covariance": str(clt.attrs.get("options_covariance", "plug-in")),
           "clt_reweighting": reweighting_diagnostics(clt),
           "measured": summary(rows[:measured]), "unmeasured": summary(rows[measured:]) if rows[measured:] else None,
           "tables": [{"table": r["table"], "cells": int(r["err"].size), "max_err_sd": float(r["err"].max()),
                       "median_err_sd": float(np.median(r["err"])), "max_rhat_da": float(r["rhat_da"].max()),
                       "min_expected": float(r["expected"].min())} for r in rows]}
    worst = sorted(doc["tables"], key=lambda t: -t["max_err_sd"])[:5]
    print(markdown(doc))
    if doc["clt_reweighting"]:
        rw = doc["clt_reweighting"]
        print(f"clt covariance reweighted: PSIS k-hat {rw['reweighting_pareto_k']:.2f} (threshold "
              f"{rw['reweighting_pareto_k_threshold']:.2f}), ESS {rw['reweighting_ess']:.0f} of "
              f"{rw['reweighting_draws']:.0f} draws")
    print("worst tables: " + "; ".join(
        f"{','.join(t['table'])} {t['max_err_sd']:.2f} (R-hat da {t['max_rhat_da']:.3f})" for t in worst))
    for kind in ("measured", "unmeasured"):
        s = doc[kind]
        if s:
            print(f"{kind}: {s['cells']:,} cells, max {s['max_err_sd']:.3f} sd (MC {s['mc_at_max']:.3f}, expected "
                  f"{s['expected_at_max']:.1f} records), median {s['median_err_sd']:.3f}, da's max R-hat "
                  f"{s['max_rhat_da']:.3f}")
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
