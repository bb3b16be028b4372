"""The NC SIDS small-area release in PyMC and in NumPyro with ``dpposterior.ppl.NoisyCount``, beside ``exact-da``.

Release: ``docs/gallery/small-area/release.json`` -- North Carolina SIDS deaths in 100 counties x 2 periods,
discrete Gaussian noise sigma = 4.47 (rho = 0.05), exposures the live births (docs/small-area.md).  Model (the
family's, default prior): y_gc ~ Poisson(E_gc exp(alpha_c + u_g)), u_g = tau z_g, z_g ~ N(0, 1),
alpha_c ~ N(0, 10^2), tau ~ half-N(0, 1); released y*_gc = y_gc + e_gc.

Engines, each (engine, seed) in a fresh process, interleaved (seed 0 of every engine, then seed 1, ...; the engine
order rotates per seed), the same work (4 chains, 1,000 warm-up + 1,000 draws):

* ``exact-da``: ``dpposterior.infer(release, method="exact-da", ...)`` (Gibbs, latent counts drawn exactly);
* ``numpyro``: NUTS (defaults: target 0.8, depth 10), the model above written with
  ``dpposterior.ppl.numpyro.NoisyCount(Poisson(mu), table.noise)`` (float64; chains sequential, NumPyro's
  default on one CPU device);
* ``pymc``: ``pm.sample`` NUTS (defaults; chains on PyMC's default ``cores``), the same model with
  ``dpposterior.ppl.pymc.NoisyCount``.

Measured: the seconds from the first import of the library to the posterior in hand (the default user path, first
call included: imports, compilation, sampling), min bulk ESS over alpha, tau and the 200 rates, min-ESS/s,
``/proc/loadavg`` before and after; and per quantity (alpha_c, tau, every rate) the posterior mean and the 5% and
95% quantiles with their Monte Carlo standard errors (ArviZ ``mcse``), from which the agreement of each PPL with
exact-da is z = (a - b) / sqrt(mcse_a^2 + mcse_b^2), pooled over the seeds.

    python benchmarks/ppl_small_area.py                     # 3 seeds, all three engines (~10 min here)
    python benchmarks/ppl_small_area.py --table             # the tables of the saved results
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "docs" / "gallery" / "small-area" / "release.json"
CHAINS, DRAWS, WARMUP = 4, 1000, 1000
ENGINES = ("exact-da", "numpyro", "pymc")


# ----------------------------------------------------------------------------- the models
def numpyro_model(table, exposure):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    from dpposterior.ppl.numpyro import NoisyCount

    G, C = table.value.shape
    E = jnp.asarray(exposure)

    def model():
        alpha = numpyro.sample("alpha", dist.Normal(0.0, 10.0).expand([C]).to_event(1))
        tau = numpyro.sample("tau", dist.HalfNormal(1.0))
        z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([G]).to_event(1))
        u = numpyro.deterministic("u", tau * z)
        mu = E * jnp.exp(alpha[None, :] + u[:, None])
        numpyro.sample("y", NoisyCount(dist.Poisson(mu), table.noise).to_event(2), obs=table.observed)

    return model


def pymc_model(table, exposure):
    import pymc as pm

    from dpposterior.ppl.pymc import NoisyCount

    G, C = table.value.shape
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0, shape=C)
        tau = pm.HalfNormal("tau", 1.0)
        z = pm.Normal("z", 0.0, 1.0, shape=G)
        u = pm.Deterministic("u", tau * z)
        mu = exposure * pm.math.exp(alpha[None, :] + u[:, None])
        NoisyCount("y", pm.Poisson.dist(mu), table.noise, observed=table.observed)
    return model


# ----------------------------------------------------------------------------- workers
def run_exact_da(seed):
    import dpposterior

    post = dpposterior.infer(str(RELEASE), method="exact-da", seed=seed, draws=DRAWS, warmup=WARMUP, chains=CHAINS)
    p = post.posterior
    return np.asarray(p["alpha"], float), np.asarray(p["tau"], float), np.asarray(p["u"], float), {}


def run_numpyro(seed):
    import jax

    jax.config.update("jax_enable_x64", True)
    from numpyro.infer import MCMC, NUTS

    from dpposterior.ppl import from_release

    data = from_release(RELEASE)
    model = numpyro_model(data["counts"], data.release.exposures())
    mcmc = MCMC(NUTS(model), num_warmup=WARMUP, num_samples=DRAWS, num_chains=CHAINS, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), extra_fields=("diverging",))
    s = mcmc.get_samples(group_by_chain=True)
    div = int(np.asarray(mcmc.get_extra_fields(group_by_chain=True)["diverging"]).sum())
    return (np.asarray(s["alpha"], float), np.asarray(s["tau"], float), np.asarray(s["u"], float),
            {"divergences": div})


def run_pymc(seed):
    import pymc as pm

    from dpposterior.ppl import from_release

    data = from_release(RELEASE)
    model = pymc_model(data["counts"], data.release.exposures())
    with model:
        idata = pm.sample(draws=DRAWS, tune=WARMUP, chains=CHAINS, random_seed=seed, progressbar=False,
                          compute_convergence_checks=False)
    post = idata.posterior
    div = int(np.asarray(idata.sample_stats["diverging"]).sum())
    return (np.asarray(post["alpha"], float), np.asarray(post["tau"], float), np.asarray(post["u"], float),
            {"divergences": div})


def summaries(alpha, tau, u) -> dict:
    """Per quantity: mean, q05, q95 and their MCSEs; bulk ESS; min-ESS."""
    import arviz as az

    from dpposterior.convergence import ess_bulk

    rate = np.exp(alpha[:, :, None, :] + u[:, :, :, None]) * 1000.0  # per 1,000 births, (ch, dr, G, C)
    quantities = {f"alpha[{c}]": alpha[:, :, c] for c in range(alpha.shape[2])}
    quantities["tau"] = tau
    G, C = rate.shape[2:]
    quantities.update({f"rate[{g},{c}]": rate[:, :, g, c] for g in range(G) for c in range(C)})
    out = {}
    for name, x in quantities.items():
        ds = az.convert_to_dataset({"x": x})
        out[name] = {
            "mean": float(x.mean()), "q05": float(np.quantile(x, 0.05)), "q95": float(np.quantile(x, 0.95)),
            "mcse_mean": float(az.mcse(ds, method="mean")["x"]),
            "mcse_q05": float(az.mcse(ds, method="quantile", prob=0.05)["x"]),
            "mcse_q95": float(az.mcse(ds, method="quantile", prob=0.95)["x"]),
            "ess_bulk": float(ess_bulk(x))}
    return out


def worker(engine: str, seed: int) -> None:
    t0 = time.perf_counter()
    alpha, tau, u, extra = {"exact-da": run_exact_da, "numpyro": run_numpyro, "pymc": run_pymc}[engine](seed)
    seconds = time.perf_counter() - t0
    s = summaries(alpha, tau, u)
    min_ess = min(v["ess_bulk"] for v in s.values())
    which = min(s, key=lambda k: s[k]["ess_bulk"])
    print("RESULT " + json.dumps({"seconds": seconds, "min_ess": min_ess, "min_ess_of": which,
                                  "min_ess_per_s": min_ess / seconds, "quantities": s, **extra,
                                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))


# ----------------------------------------------------------------------------- driver
def child_env() -> dict:
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu"})
    return env


def run_one(engine, seed, timeout) -> dict:
    from _out import run_worker

    return run_worker([sys.executable, __file__, "--worker", engine, "--worker-seed", str(seed)], child_env(), timeout,
                      {"engine": engine, "seed": seed})


def agreement(rows, engine: str, reference: str = "exact-da") -> dict:
    """z-scores of mean, q05 and q95 of every quantity, engine vs reference, each seed's run against each seed's
    reference run of the same seed index; the count of |z| > 3 against what chance gives (0.27%)."""
    ref = {r["seed"]: r["quantities"] for r in rows if r["engine"] == reference and r.get("status") == "ok"}
    zs = {"mean": [], "q05": [], "q95": []}
    worst = (0.0, "")
    for r in rows:
        if r["engine"] != engine or r.get("status") != "ok" or r["seed"] not in ref:
            continue
        for name, q in r["quantities"].items():
            b = ref[r["seed"]][name]
            for stat in zs:
                z = (q[stat] - b[stat]) / math.sqrt(q["mcse_" + stat] ** 2 + b["mcse_" + stat] ** 2)
                zs[stat].append(z)
                if abs(z) > abs(worst[0]):
                    worst = (z, f"{stat} of {name}, seed {r['seed']}")
    out = {}
    for stat, values in zs.items():
        v = np.asarray(values)
        out[stat] = {"n": int(v.size), "over3": int((np.abs(v) > 3).sum()), "mean_z": float(v.mean()) if v.size else None,
                     "sd_z": float(v.std()) if v.size else None}
    out["worst"] = {"z": worst[0], "where": worst[1]}
    return out


def table(rows) -> str:
    lines = ["| engine | seed | seconds (first call, imports included) | min bulk ESS (of) | min-ESS/s | divergences | "
             "load before / after |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lb, la = r["loadavg_before"].split()[0], r["loadavg_after"].split()[0]
        if r.get("status") != "ok":
            lines.append(f"| {r['engine']} | {r['seed']} | {r['status'][:80]} | | | | {lb} / {la} |")
            continue
        lines.append(f"| {r['engine']} | {r['seed']} | {r['seconds']:.1f} | {r['min_ess']:.0f} ({r['min_ess_of']}) | "
                     f"{r['min_ess_per_s']:.1f} | {r.get('divergences', '')} | {lb} / {la} |")
    lines += ["", "| engine | median min-ESS/s | exact-da's / this, per seed |", "|---|---|---|"]
    by = {}
    for r in rows:
        if r.get("status") == "ok":
            by.setdefault(r["engine"], {})[r["seed"]] = r["min_ess_per_s"]
    for eng, per in by.items():
        ratio = [by.get("exact-da", {}).get(s, float("nan")) / v for s, v in sorted(per.items())]
        lines.append(f"| {eng} | {np.median(list(per.values())):.1f} | {', '.join(f'{x:.1f}' for x in ratio)} |")
    lines += ["", "| engine vs exact-da | statistic | quantities x seeds | abs z > 3 (chance: 0.27%) | mean z | sd z |",
              "|---|---|---|---|---|---|"]
    for eng in by:
        if eng == "exact-da":
            continue
        ag = agreement(rows, eng)
        for stat in ("mean", "q05", "q95"):
            a = ag[stat]
            if a["n"]:
                lines.append(f"| {eng} | {stat} | {a['n']} | {a['over3']} ({100 * a['over3'] / a['n']:.1f}%) | "
                             f"{a['mean_z']:+.2f} | {a['sd_z']:.2f} |")
        lines.append(f"| {eng} | worst | | z = {ag['worst']['z']:+.2f} ({ag['worst']['where']}) | | |")
    return "\n".join(lines)


def main() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _out import add_update_flag, loadavg, out_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per (engine, seed) process")
    ap.add_argument("--out-name", default="ppl_small_area.json")
    add_update_flag(ap)
    ap.add_argument("--table", action="store_true", help="only print the tables of an existing --out-name file")
    ap.add_argument("--worker", default=None)
    ap.add_argument("--worker-seed", type=int)
    args = ap.parse_args()
    if args.worker:
        sys.path.insert(0, str(ROOT / "src"))
        worker(args.worker, args.worker_seed)
        return
    if args.table:
        print(table(json.loads((ROOT / "benchmarks" / "results" / args.out_name).read_text())["rows"]))
        return
    # fill the numba cache and PyTensor's compile cache (untimed), as after install and a first use
    for eng in args.engines:
        if eng != "numpyro":
            run_one(eng, 99, args.timeout)
    out = out_path(None, args.out_name, args.update_results)
    import importlib.metadata as md

    meta = {"cores": len(os.sched_getaffinity(0)), "python": sys.version.split()[0], "chains": CHAINS,
            "draws": DRAWS, "warmup": WARMUP, "release": str(RELEASE.relative_to(ROOT)),
            "versions": {p: md.version(p) for p in ("numpyro", "jax", "pymc", "pytensor", "numba", "numpy")},
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "loadavg_start": loadavg()}
    rows = []
    for i, seed in enumerate(args.seeds):
        order = list(args.engines[i % len(args.engines):]) + list(args.engines[:i % len(args.engines)])
        for eng in order:
            rec = run_one(eng, seed, args.timeout)
            rows.append(rec)
            print(f"{eng} seed {seed}: {rec.get('status')} {rec.get('seconds', float('nan')):.1f} s, "
                  f"min-ESS {rec.get('min_ess', float('nan')):.0f}", flush=True)
            out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(table(rows))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
