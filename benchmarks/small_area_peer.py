"""Small-area peer benchmark: ``infer(method="exact-da")`` against NumPyro NUTS.

Model (families/small_area.py):  y_gc ~ Poisson(E_g exp(alpha_c + u_g)),  u_g ~ N(0, tau^2),
alpha_c ~ N(1, 1),  tau ~ half-N(0, 1);  released y*_gc = y_gc + e_gc, e ~ discrete Gaussian
N_Z(0, sigma^2).  Data: ``families.small_area.simulate(SmallAreaPrior(alpha_mean=1, alpha_sd=1), G,
C=2, sigma=2, rng, exposure=uniform(5, 50))`` with ``rng = default_rng(seed)`` (the exposures come
from the same generator, drawn first): both engines see the same release.

Engines
-------
* ``exact-da``: ``dpposterior.infer(release, prior, method="exact-da", seed, draws=1000, warmup=500,
  chains=4)`` -- Gibbs with every latent count drawn exactly; numba, chains on threads (``prange``).
* ``numpyro``: the same hierarchy in NumPyro, the latent counts summed out exactly: for every cell
  log p(y* | mu) = logsumexp_{y in [max(0, y* - W), y* + W]} [Poisson(y; mu) + log eta(y* - y)],
  eta(k) = exp(-k^2 / (2 sigma^2)) (the discrete Gaussian's normaliser is a constant, dropped),
  W = ceil(sigma sqrt(2 log(2 / 1e-12))) + 1 (the window holds all but 1e-12 of the noise).
  Non-centred u = tau z, z ~ N(0, 1) (``numpyro-centred``: u ~ N(0, tau^2) directly, run for
  comparison with ``--engines``).  NUTS defaults (target 0.8, max tree depth 10, diagonal mass
  matrix), 4 chains ``chain_method="sequential"`` (the default with one CPU device; see --chain-method),
  500 warm-up + 1,000 draws, float64.

Measures (each (G, seed, engine) in a fresh process, interleaved: seed 0 of every engine, then seed
1, ...; the engine order alternates per seed): the wall time of the first call (NumPyro: tracing +
XLA compilation + sampling; exact-da: numba cache load + sampling -- the cache is filled by an
untimed run first, as it is after install), and of a second call in the same process with seed + 100
(same data; NumPyro reuses the compiled kernel); min bulk ESS (``dpposterior.convergence.ess_bulk``
on (chain, draw) arrays) over alpha_c, tau and every rate exp(alpha_c + u_g); min-ESS/s of the
first and second calls; posterior means and sds of alpha and tau (agreement: |mean_a - mean_b| /
sd, sd pooled as the root mean of the two variances); NumPyro's divergences and mean tree depth;
peak RSS; and ``/proc/loadavg`` before and after every run.

Threads: both engines get the same CPU set (``os.sched_getaffinity`` of the driver, recorded);
numba uses that many threads (NUMBA_NUM_THREADS), XLA its default CPU thread pool over the same
cores; BLAS/OpenMP held to 1 (neither side uses them in the hot loop).

    python benchmarks/small_area_peer.py                                  # G 100 1000, seeds 0 1 2
    python benchmarks/small_area_peer.py --G 100 1000 10000 --seeds 0 1 2 --timeout 900
    python benchmarks/small_area_peer.py --table                          # the table of the saved results
    python benchmarks/small_area_peer.py --G 100 --seeds 0 --engines exact-da numpyro numpyro-centred \
        --out-name small_area_peer_param.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
C, SIGMA, DRAWS, WARMUP, CHAINS = 2, 2.0, 1000, 500, 4
PRIOR = {"alpha_mean": 1.0, "alpha_sd": 1.0}
TAIL = 1e-12


def make_release(G: int, seed: int):
    from dpposterior.families.small_area import SmallAreaPrior, simulate

    rng = np.random.default_rng(seed)
    E = rng.uniform(5.0, 50.0, size=G)
    truth, rel = simulate(SmallAreaPrior(**PRIOR), G, C, SIGMA, rng, exposure=E)
    return truth, rel


def summarise(alpha, u, tau) -> dict:
    """alpha (ch, dr, C), u (ch, dr, G), tau (ch, dr) -> min ESS etc."""
    from dpposterior.convergence import ess_bulk

    t0 = time.perf_counter()
    ess_alpha = [ess_bulk(alpha[:, :, c]) for c in range(alpha.shape[2])]
    ess_tau = ess_bulk(tau)
    log_rate = alpha[:, :, None, :] + u[:, :, :, None]  # (ch, dr, G, C)
    rate = np.exp(log_rate)
    ess_rate = np.array([[ess_bulk(rate[:, :, g, c]) for c in range(rate.shape[3])] for g in range(rate.shape[2])])
    min_ess = float(np.nanmin([*ess_alpha, ess_tau, float(np.nanmin(ess_rate))]))
    which = "tau" if min_ess == ess_tau else ("alpha" if min_ess in ess_alpha else "rate")
    return {"ess_alpha": [float(e) for e in ess_alpha], "ess_tau": float(ess_tau),
            "ess_rate_min": float(np.nanmin(ess_rate)), "ess_rate_median": float(np.nanmedian(ess_rate)),
            "min_ess": min_ess, "min_ess_of": which,
            "mean_alpha": alpha.mean(axis=(0, 1)).tolist(), "sd_alpha": alpha.std(axis=(0, 1)).tolist(),
            "mean_tau": float(tau.mean()), "sd_tau": float(tau.std()),
            "ess_seconds": time.perf_counter() - t0}


# ----------------------------------------------------------------------------- workers
def run_exact_da(rel, seed: int, second: bool) -> dict:
    import dpposterior

    out = {}
    for call, s in (("first", seed), ("second", seed + 100)):
        if call == "second" and not second:
            break
        t0 = time.perf_counter()
        post = dpposterior.infer(rel, prior=PRIOR, method="exact-da", seed=s, draws=DRAWS, warmup=WARMUP,
                                 chains=CHAINS)
        wall = time.perf_counter() - t0
        p = post.posterior
        tau = p["tau"]
        out[call] = {"seconds": wall, **summarise(p["alpha"], p["u"], tau)}
    return out


def numpyro_model(ystar, E, sigma, centred: bool):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.special import gammaln, logsumexp

    W = math.ceil(sigma * math.sqrt(2.0 * math.log(2.0 / TAIL))) + 1
    k = np.arange(-W, W + 1)
    ygrid = ystar[:, :, None] + k[None, None, :]  # (G, C, 2W+1) candidate latent counts
    valid = ygrid >= 0
    ysafe = np.where(valid, ygrid, 0).astype(float)
    # log eta(y* - y) - lgamma(y + 1), -inf outside [0, inf): constants of the likelihood
    const = np.where(valid, -0.5 * (k[None, None, :] / sigma) ** 2 - np.vectorize(math.lgamma)(ysafe + 1.0), -np.inf)
    ysafe_j, const_j, logE = jnp.asarray(ysafe), jnp.asarray(const), jnp.asarray(np.log(E))
    G, Cn = ystar.shape

    def model():
        alpha = numpyro.sample("alpha", dist.Normal(PRIOR["alpha_mean"], PRIOR["alpha_sd"]).expand([Cn]).to_event(1))
        tau = numpyro.sample("tau", dist.HalfNormal(1.0))
        if centred:
            u = numpyro.sample("u", dist.Normal(0.0, tau).expand([G]).to_event(1))
        else:
            z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([G]).to_event(1))
            u = numpyro.deterministic("u", tau * z)
        log_mu = logE[:, None] + alpha[None, :] + u[:, None]  # (G, C)
        mu = jnp.exp(log_mu)
        lp = ysafe_j * log_mu[:, :, None] - mu[:, :, None] + const_j  # log Poisson + log eta over the window
        numpyro.factor("released", logsumexp(lp, axis=-1).sum())

    return model, W


def run_numpyro(rel, seed: int, second: bool, centred: bool, chain_method: str, chains: int = CHAINS) -> dict:
    import jax
    from numpyro.infer import MCMC, NUTS

    ystar = np.asarray(rel["statistics"]["counts"]["value"], dtype=np.int64)
    E = np.asarray(rel["exposure"], float)
    model, W = numpyro_model(ystar, E, SIGMA, centred)
    mcmc = MCMC(NUTS(model), num_warmup=WARMUP, num_samples=DRAWS, num_chains=chains, chain_method=chain_method,
                progress_bar=False)
    out = {"window_half_width": W}
    for call, s in (("first", seed), ("second", seed + 100)):
        if call == "second" and not second:
            break
        t0 = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(s), extra_fields=("diverging", "num_steps"))
        smp = mcmc.get_samples(group_by_chain=True)
        jax.block_until_ready(smp)
        wall = time.perf_counter() - t0
        ex = mcmc.get_extra_fields(group_by_chain=True)
        alpha, tau, u = (np.asarray(smp[n], float) for n in ("alpha", "tau", "u"))
        steps = np.asarray(ex["num_steps"])
        out[call] = {"seconds": wall, **summarise(alpha, u, tau), "divergences": int(np.asarray(ex["diverging"]).sum()),
                     "mean_leapfrog_steps": float(steps.mean()),
                     "mean_tree_depth": float(np.log2(steps + 1).mean())}
    return out


def worker(args) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    t0 = time.perf_counter()
    if args.engine.startswith("numpyro"):
        import jax

        jax.config.update("jax_enable_x64", True)
        import numpyro  # noqa: F401
    else:
        import dpposterior  # noqa: F401
    setup = time.perf_counter() - t0
    truth, rel = make_release(args.worker_G, args.worker_seed)
    if args.engine == "exact-da":
        res = run_exact_da(rel, args.worker_seed, args.second)
    else:
        res = run_numpyro(rel, args.worker_seed, args.second, args.engine == "numpyro-centred", args.chain_method,
                          args.numpyro_chains)
        res["chains"] = args.numpyro_chains
    res.update(setup_seconds=setup, truth_tau=float(truth["tau"]), truth_alpha=np.asarray(truth["alpha"]).tolist(),
               peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
    print("RESULT " + json.dumps(res))


# ----------------------------------------------------------------------------- driver
def child_env(cores: int) -> dict:
    env = dict(os.environ)
    env.update({"PYTHONPATH": str(ROOT / "src"), "NUMBA_NUM_THREADS": str(cores), "OMP_NUM_THREADS": "1",
                "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu",
                "JAX_ENABLE_X64": "1"})
    env.pop("XLA_FLAGS", None)
    return env


def run_one(engine, G, seed, args, cores) -> dict:
    cmd = [sys.executable, __file__, "--worker", engine, "--worker-G", str(G), "--worker-seed", str(seed),
           "--chain-method", args.chain_method, "--numpyro-chains", str(args.numpyro_chains),
           "--draws", str(args.draws), "--warmup", str(args.warmup)]
    if args.second and not (engine.startswith("numpyro") and G > args.second_max_G):
        cmd.append("--worker-second")
    from _out import run_worker

    return run_worker(cmd, child_env(cores), args.timeout, {"engine": engine, "G": G, "C": C, "sigma": SIGMA,
                                                             "seed": seed})


def agreement(rows) -> None:
    """Per (G, seed): |mean_exact - mean_numpyro| / pooled sd, for alpha_c and tau (first calls)."""
    by = {}
    for r in rows:
        if r.get("status") == "ok":
            by.setdefault((r["G"], r["seed"]), {})[r["engine"]] = r["first"]
    for r in rows:
        ref = by.get((r["G"], r["seed"]), {}).get("exact-da")
        if r.get("status") != "ok" or r["engine"] == "exact-da" or ref is None:
            continue
        mine = r["first"]
        zs = {}
        for c in range(C):
            sd = math.sqrt((ref["sd_alpha"][c] ** 2 + mine["sd_alpha"][c] ** 2) / 2)
            zs[f"alpha{c}"] = abs(ref["mean_alpha"][c] - mine["mean_alpha"][c]) / sd
        sd = math.sqrt((ref["sd_tau"] ** 2 + mine["sd_tau"] ** 2) / 2)
        zs["tau"] = abs(ref["mean_tau"] - mine["mean_tau"]) / sd
        r["agreement_sd_units"] = zs
        r["ratio_min_ess_per_s_exact_over_this"] = (ref["min_ess"] / ref["seconds"]) / (mine["min_ess"] / mine["seconds"])


def table(rows) -> str:
    hdr = (f"{'G':>6} {'seed':>4} {'engine':<16} {'1st s':>8} {'2nd s':>8} {'minESS':>7} {'of':>5} {'ESS/s 1st':>10} "
           f"{'ESS/s 2nd':>10} {'tau':>12} {'|d|/sd a,tau':>14} {'div':>4} {'load before/after':>18}")
    lines = [hdr, "-" * len(hdr)]
    for r in rows:
        lb, la = r["loadavg_before"].split()[0], r["loadavg_after"].split()[0]
        if r.get("status") != "ok":
            lines.append(f"{r['G']:>6} {r['seed']:>4} {r['engine']:<16} {r['status'][:80]}  load {lb}/{la}")
            continue
        f, s = r["first"], r.get("second")
        ag = r.get("agreement_sd_units")
        agtxt = "" if ag is None else f"{max(ag['alpha0'], ag['alpha1']):.2f},{ag['tau']:.2f}"
        lines.append(
            f"{r['G']:>6} {r['seed']:>4} {r['engine']:<16} {f['seconds']:>8.1f} "
            f"{(s['seconds'] if s else float('nan')):>8.1f} {f['min_ess']:>7.0f} {f['min_ess_of']:>5} "
            f"{f['min_ess'] / f['seconds']:>10.2f} {(s['min_ess'] / s['seconds'] if s else float('nan')):>10.2f} "
            f"{f['mean_tau']:>6.3f}±{f['sd_tau']:<5.3f} {agtxt:>14} {str(f.get('divergences', '')):>4} "
            f"{lb + '/' + la:>18}")
    # summary: median over seeds of ESS/s, ratio
    lines.append("")
    Gs = sorted({r["G"] for r in rows})
    for G in Gs:
        for eng in sorted({r["engine"] for r in rows}):
            rr = [r for r in rows if r["G"] == G and r["engine"] == eng and r.get("status") == "ok"]
            if not rr:
                continue
            e1 = np.median([r["first"]["min_ess"] / r["first"]["seconds"] for r in rr])
            sec = [r["second"]["min_ess"] / r["second"]["seconds"] for r in rr if r.get("second")]
            rat = [r["ratio_min_ess_per_s_exact_over_this"] for r in rr if "ratio_min_ess_per_s_exact_over_this" in r]
            lines.append(f"G={G:>6} {eng:<16} median min-ESS/s first call {e1:9.2f}"
                         + (f", second call {np.median(sec):9.2f}" if sec else "")
                         + (f";  exact-da / this (first calls, per seed): {', '.join(f'{x:.1f}' for x in rat)}"
                            if rat else ""))
    return "\n".join(lines)


def main() -> None:
    global DRAWS, WARMUP
    from _out import add_update_flag, loadavg, out_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--G", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--engines", nargs="+", default=["exact-da", "numpyro"])
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per (G, seed, engine) process")
    ap.add_argument("--no-second", dest="second", action="store_false", help="skip the second call")
    ap.add_argument("--second-max-G", type=int, default=1000, help="NumPyro's second call only up to this G")
    ap.add_argument("--chain-method", default="sequential", choices=["sequential", "vectorized"])
    ap.add_argument("--numpyro-chains", type=int, default=CHAINS,
                    help="NumPyro's chains (default 4; 1 = a bounded probe of its ESS/s where 4 do not finish)")
    ap.add_argument("--draws", type=int, default=DRAWS, help="draws per chain, both engines (same work)")
    ap.add_argument("--warmup", type=int, default=WARMUP, help="warm-up iterations per chain, both engines")
    ap.add_argument("--out-name", default="small_area_peer.json")
    add_update_flag(ap)
    ap.add_argument("--table", action="store_true", help="only print the table of an existing --out-name file")
    ap.add_argument("--worker", default=None)
    ap.add_argument("--worker-G", type=int)
    ap.add_argument("--worker-seed", type=int)
    ap.add_argument("--worker-second", action="store_true")
    args = ap.parse_args()
    DRAWS, WARMUP = args.draws, args.warmup
    if args.worker:
        args.engine = args.worker
        args.second = args.worker_second
        worker(args)
        return
    if args.table:
        rows = json.loads((ROOT / "benchmarks" / "results" / args.out_name).read_text())["rows"]
        agreement(rows)
        print(table(rows))
        return
    cores = len(os.sched_getaffinity(0))
    # fill the numba cache (untimed), as after install
    if "exact-da" in args.engines:
        subprocess.run([sys.executable, __file__, "--worker", "exact-da", "--worker-G", "10", "--worker-seed", "0"],
                       env=child_env(cores), capture_output=True, text=True, timeout=args.timeout)
    rows = []
    out = out_path(None, args.out_name, args.update_results)
    meta = {"cores": cores, "affinity": sorted(os.sched_getaffinity(0)), "nproc": os.cpu_count(),
            "chain_method_numpyro": args.chain_method, "draws": DRAWS, "warmup": WARMUP, "chains": CHAINS,
            "C": C, "sigma": SIGMA, "prior": PRIOR, "exposure": "uniform(5, 50)",
            "env": {k: v for k, v in child_env(cores).items()
                    if k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "JAX_PLATFORMS", "JAX_ENABLE_X64")},
            "python": sys.version.split()[0], "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "loadavg_start": loadavg()}
    try:
        import importlib.metadata as md

        meta["versions"] = {p: md.version(p) for p in ("numpyro", "jax", "jaxlib", "numba", "numpy")}
    except Exception:  # noqa: BLE001
        pass
    for G in args.G:
        for i, seed in enumerate(args.seeds):
            engines = args.engines if i % 2 == 0 else list(reversed(args.engines))
            for eng in engines:
                rec = run_one(eng, G, seed, args, cores)
                rows.append(rec)
                print(f"  done G={G} seed={seed} {eng}: {rec['status']} ({rec['process_seconds']:.0f} s, "
                      f"load {rec['loadavg_after']})", flush=True)
                agreement(rows)
                out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    meta["loadavg_end"] = loadavg()
    agreement(rows)
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(table(rows))
    print(f"-> {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
