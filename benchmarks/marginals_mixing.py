"""Mixing of the ``marginals`` family's ``da`` engine with and without its group moves, on a synthetic release
where the record sweep alone mixes slowly: five attributes (2, 4, 2, 4, 5 levels, one with rare levels), a
triangle of measured pairs (A, B), (B, C), (A, C) (so the unmeasured three-way table (A, B, C) is a clique of the
model) and two more pairs, n = 5,000, discrete Gaussian noise sigma 20 per cell against cells of tens of records.

Prints max R-hat and min bulk ESS over every clique cell, wall and CPU seconds of the inference (4 chains, after
one tiny call that compiles).  Compare settings at equal CPU by scaling --warmup and --draws with the per-sweep
cost, e.g. ``--group-moves 0 --warmup 300 --draws 1200`` (the default) against ``--group-moves 4 --warmup 130 --draws
520``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np


def release(seed: int = 0, n: int = 5000, sigma: float = 20.0) -> dict:
    rng = np.random.default_rng(seed)
    a = rng.random(n) < 0.3
    b = rng.choice(4, n, p=[0.85, 0.1, 0.04, 0.01])
    c = (rng.random(n) < np.where(a, 0.6, 0.2) + 0.1 * (b > 0)).astype(int)
    d = np.minimum(3, rng.poisson(0.5 + 1.5 * c))
    e = (d + rng.integers(0, 3, n)) % 5
    rec = {"A": a.astype(int), "B": b, "C": c, "D": d, "E": e}
    dom = {"A": 2, "B": 4, "C": 2, "D": 4, "E": 5}
    meas = []
    for pair in (("A", "B"), ("B", "C"), ("A", "C"), ("C", "D"), ("D", "E")):
        tab = np.zeros([dom[x] for x in pair], int)
        np.add.at(tab, tuple(rec[x] for x in pair), 1)
        noisy = tab + np.rint(rng.normal(0, sigma, tab.shape)).astype(int)
        meas.append({"clique": list(pair), "value": noisy.tolist(), "mechanism": "discrete-gaussian", "sigma": sigma})
    return {"format": "dpposterior-release/1", "family": "marginals", "n": n, "domain": dom, "measurements": meas}


def summary(post) -> tuple[float, float]:
    import arviz as az

    rhat, ess = [], []
    for x in post.posterior.values():
        x = np.asarray(x)
        flat = x.reshape(x.shape[0], x.shape[1], -1)
        for i in range(flat.shape[2]):
            rhat.append(float(az.rhat(flat[:, :, i])))
            ess.append(float(az.ess(flat[:, :, i], method="bulk")))
    return max(rhat), min(ess)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--group-moves", type=int, default=None, help="da's group_moves (default: the package's)")
    ap.add_argument("--warmup", type=int, default=130)
    ap.add_argument("--draws", type=int, default=520)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    from dpposterior import infer

    warnings.simplefilter("ignore")
    extra = {} if args.group_moves is None else {"group_moves": args.group_moves}
    rel = release()
    infer(rel, method="da", draws=5, warmup=2, chains=1, seed=0, **extra)  # compile
    t0, c0 = time.time(), time.process_time()
    post = infer(rel, method="da", draws=args.draws, warmup=args.warmup, chains=4, seed=args.seed, **extra)
    wall, cpu = time.time() - t0, time.process_time() - c0
    rhat, ess = summary(post)
    print(json.dumps({"group_moves": post.attrs.get("options_group_moves"), "warmup": args.warmup,
                      "draws": args.draws, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                      "max_rhat": round(rhat, 3), "min_bulk_ess": round(ess, 1)}))


if __name__ == "__main__":
    main()
