"""Peer benchmark: the ``da`` engine against NumPyro NUTS on the exact likelihood of small noisy-marginals releases.

NumPyro cannot sample the latent integer table, so its model (``_marginals_numpyro.py``) sums it out: the
likelihood of the noisy marginals given the cell probabilities p is a log-sum-exp over every table of n records,
and NUTS runs on p (the hyper-Dirichlet clique conditionals, Dawid & Lauritzen 1993, Sec. 7).  That is exact, and
it is what a NumPyro user can write; its cost grows with the number of tables, C(n + K - 1, K - 1) for K cells,
which is why it only runs on small cases.  ``da`` (docs/marginals.md) samples the table itself.

Cases (a - b - c chains, both two-way marginals measured, concentration A = 2):

* ``chain-n5``: 2 x 2 x 2, n = 5, discrete Gaussian sigma 0.8 on (a, b), discrete Laplace epsilon 2 on (b, c)
  (the release tests/test_marginals.py checks against enumeration); 792 tables;
* ``chain-n12``: 2 x 2 x 2, n = 12, discrete Gaussian sigma 1.5 and discrete Laplace epsilon 1, simulated from a
  seeded table; 50,388 tables;
* ``chain-3x8``: 2 x 3 x 2, n = 8, discrete Gaussian sigma 1 on both; 75,582 tables.

Each (case, engine, repetition) runs in a fresh process, repetitions interleaved (rep 1 of every engine, then
rep 2, ...), with the 1-minute load average recorded.  A process imports its libraries (``setup_seconds``), then
times a first call (NumPyro: tracing and XLA compilation; dpposterior: loading its numba cache) and a second call
with another seed.  Both engines run 4 chains of 500 warm-up iterations and 5,000 draws (``da``'s defaults, which
``infer`` uses here; NumPyro's chains sequential, its default on one CPU device), each library threading as it does
by default (``da``'s chains on two threads, XLA's own).
Quantities: every cell of both measured tables and of the unmeasured (a, c) margin.  min-ESS is ArviZ's bulk ESS,
minimum over them; agreement is the largest |posterior mean - exact mean| in Monte Carlo standard errors and in
posterior standard deviations, against the enumeration reference.

    python benchmarks/marginals_numpyro_peer.py --reps 3 --update-results
    # -> benchmarks/results/marginals_numpyro_peer.json; --table FILE prints a results file's table
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
CHAINS, WARMUP, DRAWS = 4, 500, 5000
CONCENTRATION = 2.0
ENGINES = ("dpposterior", "numpyro")
CASES = ("chain-n5", "chain-n12", "chain-3x8")


def release(case: str) -> dict:
    """The release of a case (a dict in the release format)."""
    if case == "chain-n5":
        return {"format": "dpposterior-release/1", "family": "marginals", "n": 5, "domain": {"a": 2, "b": 2, "c": 2},
                "measurements": [
                    {"clique": ["a", "b"], "value": [[2, 0], [1, 2]], "mechanism": "discrete-gaussian", "sigma": 0.8},
                    {"clique": ["b", "c"], "value": [[1, 2], [0, 3]], "mechanism": "discrete-laplace",
                     "epsilon": 2.0}]}
    sizes, n, noise = {"chain-n12": ({"a": 2, "b": 2, "c": 2}, 12, ({"sigma": 1.5}, {"epsilon": 1.0})),
                       "chain-3x8": ({"a": 2, "b": 3, "c": 2}, 8, ({"sigma": 1.0}, {"sigma": 1.0}))}[case]
    rng = np.random.default_rng(7)
    shape = tuple(sizes.values())
    table = rng.multinomial(n, rng.dirichlet(np.ones(int(np.prod(shape))))).reshape(shape)
    meas = []
    for clique, axis, law in ((["a", "b"], 2, noise[0]), (["b", "c"], 0, noise[1])):
        t = table.sum(axis=axis)
        if "sigma" in law:  # seeded numpy noise, for a benchmark (publication noise comes from OpenDP)
            from dpposterior.mechanisms.discrete_gaussian import DiscreteGaussian

            e = DiscreteGaussian(law["sigma"]).draw(t.shape, rng)
            meas.append({"clique": clique, "value": (t + e).tolist(), "mechanism": "discrete-gaussian", **law})
        else:
            from dpposterior.mechanisms.discrete_laplace import DiscreteLaplace

            e = DiscreteLaplace(law["epsilon"], 2.0).draw(t.shape, rng)
            meas.append({"clique": clique, "value": (t + e).tolist(), "mechanism": "discrete-laplace", **law})
    return {"format": "dpposterior-release/1", "family": "marginals", "n": n, "domain": sizes, "measurements": meas}


QUANTITIES = (("a", "b"), ("b", "c"), ("a", "c"))


# ----------------------------------------------------------------------------- engines (worker side)
def _dpposterior_runner(case: str):
    from dpposterior import infer, load_release

    rel = load_release(release(case))

    def run(seed):
        post = infer(rel, method="da", prior={"concentration": CONCENTRATION}, seed=seed)
        return {q: np.asarray(post.marginal(list(q)).values) for q in QUANTITIES}
    return run


def _numpyro_runner(case: str):
    import jax
    from numpyro.infer import MCMC, NUTS

    from _marginals_numpyro import ExactMarginals

    em = ExactMarginals(release(case), CONCENTRATION)
    mcmc = MCMC(NUTS(em.model), num_warmup=WARMUP, num_samples=DRAWS, num_chains=CHAINS, chain_method="sequential",
                progress_bar=False)

    def run(seed):
        with jax.enable_x64(True):  # double precision, as the package's own NumPyro engine (clt) runs
            mcmc.run(jax.random.PRNGKey(seed))
        joint = np.asarray(mcmc.get_samples(group_by_chain=True)["joint"])
        return {q: em.marginal(joint, list(q)) for q in QUANTITIES}
    return run


def _summary(draws: dict, seconds: float, ref: dict) -> dict:
    import arviz as az

    ess, err_se, err_sd = [], [], []
    for q, d in draws.items():
        flat = d.reshape(d.shape[0], d.shape[1], -1)
        exact = np.asarray(ref["_".join(q)]).ravel()
        for i in range(flat.shape[2]):
            e = float(az.ess(flat[:, :, i], method="bulk"))
            sd = float(flat[:, :, i].std())
            gap = abs(float(flat[:, :, i].mean()) - exact[i])
            ess.append(e)
            err_se.append(gap / (sd / np.sqrt(max(e, 1.0))))
            err_sd.append(gap / sd)
    return {"seconds": seconds, "min_ess": min(ess), "min_ess_per_s": min(ess) / seconds,
            "max_error_in_mc_se": max(err_se), "max_error_in_sd": max(err_sd)}


def worker(case: str, engine: str, rep: int) -> dict:
    t0 = time.perf_counter()
    if engine == "dpposterior":
        import arviz  # noqa: F401  (infer's convergence checks import it)

        import dpposterior.inference.marginals_da  # noqa: F401
        run = _dpposterior_runner(case)
    else:
        run = _numpyro_runner(case)
    setup = time.perf_counter() - t0
    ref = _reference(case)
    out = {"case": case, "engine": engine, "rep": rep, "setup_seconds": setup, "load1": os.getloadavg()[0]}
    for call, seed in (("first", 1000 * rep + 1), ("second", 1000 * rep + 2)):
        t = time.perf_counter()
        draws = run(seed)
        out[call] = _summary(draws, time.perf_counter() - t, ref)
    out["load1_end"] = os.getloadavg()[0]
    return out


def _reference(case: str) -> dict:
    from _marginals_numpyro import ExactMarginals

    em = ExactMarginals(release(case), CONCENTRATION)
    joint = em.reference()["joint"]
    return {"_".join(q): em.marginal(joint, list(q)).tolist() for q in QUANTITIES}


# ----------------------------------------------------------------------------- orchestration
def _spawn(case, engine, rep) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("JAX_PLATFORMS", "cpu")
    res = subprocess.run([sys.executable, __file__, "--worker", case, engine, str(rep)], env=env,
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return {"case": case, "engine": engine, "rep": rep, "error": res.stderr[-2000:]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def summarise(records, cases) -> dict:
    from _marginals_numpyro import n_tables

    out = {}
    for case in cases:
        rel = release(case)
        cells = int(np.prod(list(rel["domain"].values())))
        row = {"n": rel["n"], "cells": cells, "tables": n_tables(rel["n"], cells)}
        for engine in ENGINES:
            rs = [r for r in records if r["case"] == case and r["engine"] == engine and "error" not in r]
            if not rs:
                continue
            row[engine] = {"reps": len(rs), "median_setup_seconds": float(np.median([r["setup_seconds"] for r in rs]))}
            for call in ("first", "second"):
                row[engine][call] = {
                    "median_seconds": float(np.median([r[call]["seconds"] for r in rs])),
                    "median_min_ess_per_s": float(np.median([r[call]["min_ess_per_s"] for r in rs])),
                    "max_error_in_mc_se": float(max(r[call]["max_error_in_mc_se"] for r in rs)),
                    "max_error_in_sd": float(max(r[call]["max_error_in_sd"] for r in rs))}
        if all(e in row for e in ENGINES):
            for call in ("first", "second"):
                row[f"min_ess_per_s_ratio_{call}"] = (row["dpposterior"][call]["median_min_ess_per_s"]
                                                      / row["numpyro"][call]["median_min_ess_per_s"])
        out[case] = row
    return out


def markdown(result: dict) -> str:
    lines = ["| case | n | cells | tables | engine | s first / second call | min-ESS/s first / second | "
             "max mean error (MC se) | max mean error (post. sd) | da ÷ NumPyro min-ESS/s first / second | reps |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for case, row in result["summary"].items():
        for engine in ENGINES:
            if engine not in row:
                continue
            v = row[engine]
            f, s = v["first"], v["second"]
            ratio = (f"{row['min_ess_per_s_ratio_first']:.1f} / {row['min_ess_per_s_ratio_second']:.1f}"
                     if engine == "dpposterior" and "min_ess_per_s_ratio_first" in row else "")
            lines.append(f"| {case} | {row['n']} | {row['cells']} | {row['tables']:,} | {engine} | "
                         f"{f['median_seconds']:.2f} / {s['median_seconds']:.2f} | "
                         f"{f['median_min_ess_per_s']:,.0f} / {s['median_min_ess_per_s']:,.0f} | "
                         f"{max(f['max_error_in_mc_se'], s['max_error_in_mc_se']):.1f} | "
                         f"{max(f['max_error_in_sd'], s['max_error_in_sd']):.3f} | {ratio} | {v['reps']} |")
    loads = [r[k] for r in result["records"] for k in ("load1", "load1_end") if k in r]
    if loads:
        lines += ["", f"1-minute load average during the runs: {min(loads):.1f}–{max(loads):.1f} (2 cores)."]
    return "\n".join(lines)


def main(argv=None):
    from _out import add_update_flag, loadavg, out_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", nargs=3, metavar=("CASE", "ENGINE", "REP"))
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--table", type=Path, default=None, help="print the table of a results file and stop")
    add_update_flag(ap)
    args = ap.parse_args(argv)
    if args.worker:
        case, engine, rep = args.worker
        print(json.dumps(worker(case, engine, int(rep))))
        return
    if args.table:
        print(markdown(json.loads(args.table.read_text())))
        return
    path = out_path(args.out, "marginals_numpyro_peer.json", args.update_results)
    records = []
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "loadavg_start": loadavg(), "chains": CHAINS,
            "warmup": WARMUP, "draws": DRAWS, "concentration": CONCENTRATION, "reps": args.reps,
            "nproc": os.cpu_count()}
    for rep in range(1, args.reps + 1):
        for case in args.cases:
            for engine in ENGINES:
                rec = _spawn(case, engine, rep)
                records.append(rec)
                msg = rec.get("error", "").splitlines()[-1:] if "error" in rec else \
                    f"{rec['first']['seconds']:.1f} s / {rec['second']['seconds']:.1f} s"
                print(f"rep {rep} {case} {engine}: {msg}", flush=True)
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    meta["loadavg_end"] = loadavg()
    result = {"meta": meta, "records": records, "summary": summarise(records, args.cases)}
    path.write_text(json.dumps(result, indent=1))
    print(markdown(result))


if __name__ == "__main__":
    main()
