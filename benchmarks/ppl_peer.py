"""Peer benchmark: dpposterior's default ``infer`` against NumPyro NUTS on the same
noise-aware models, in min-ESS per second.

Cases
-----
* ``example1``: Kazan & Reiter, Example 1 (blood lead; n = 43, bounds [0, 100], eps = 0.25 + 0.25,
  the paper's NIG prior, unconstrained).  NumPyro models (on the [0, 1] scale, Theorem 1):
  sigma^2 ~ IG(nu0/2, nu0 s0^2/2), mu | sigma^2 ~ N(mu0, sigma^2/kappa0), Ybar ~ N(mu, sigma^2/n),
  S^2 ~ Gam((n-1)/2, (n-1)/(2 sigma^2)), Ybar* ~ Lap(Ybar, b1), S2* ~ Lap(S^2, b2) -- centred
  (Ybar, S^2 latent) and non-centred (Ybar = mu + sd z, S^2 = sigma^2 g).  Reference: the grid
  oracle (``gaussian_grid``, 200,000 draws), which also applies the eq. (47) truncation
  sigma^2 < (n-1)/(2 n eps2) (posterior mass beyond it is negligible here).
* ``binomial``: one release of the Gibbs-SS calibration study (n = 100, noisy successes 37.2,
  Laplace eps = 0.1, Beta(1, 1)).  NumPyro: the normal-approximation model Gibbs-SS targets,
  s ~ N(n theta, n theta (1 - theta)) truncated to [0, n], y ~ Lap(s, 1/eps), centred and
  non-centred (untruncated s = n theta + sd z), and the exact model with the count summed out
  (y | theta = sum_s Binom(s; n, theta) Lap(y; s, 1/eps)).  Reference: that exact posterior on a
  20,000-point grid.
* ``linreg``: linear regression, fixedS (Alparslan et al., Algorithm 2), d = 5, n = 10^4, one
  party, eps = 1, simulated from the default prior (``families.linear_regression.simulate``).
  NumPyro: z_j integrated out (zhat ~ N(S~ theta, sigma^2 S~ + sigma_z^2 I)), and with z latent,
  centred (z ~ N(S~ theta, sigma^2 S~)) and non-centred (z = S~ theta + sigma L_S e).
  Reference: theta | sigma^2 is Gaussian (eq. 12) and p(sigma^2 | zhat) is a 1-D density
  (zhat ~ N(S~ m, S~ C S~ + sigma^2 S~ + sigma_z^2 I)), integrated on a 4,000-point grid.

Each (case, engine) runs in a fresh process with XLA / OpenMP / BLAS / numba held to one
thread; the process imports its libraries (``setup_seconds``: jax + numpyro, or dpposterior's
modules + ArviZ), then times its first call (NumPyro: tracing + compilation; dpposterior:
loading the numba cache, or compiling with ``--cold-cache``) and a second call with another seed.  min-ESS is ArviZ's bulk ESS, minimum
over the parameters (mu, sigma^2 / theta / theta_1..d, sigma^2).  Both engines run 4 chains of
1,000 warm-up + 5,000 draws (dpposterior's defaults; NumPyro's chains sequential).  Agreement:
the largest |posterior mean - reference mean| / reference sd over the parameters, and the
largest relative error of the posterior sd.  Repetitions are interleaved (rep 1 of every
engine, then rep 2, ...), and each record carries the 1-minute load average (``uptime``).

    python benchmarks/ppl_peer.py --reps 3                     # everything -> benchmarks/results/ppl_peer.json
    python benchmarks/ppl_peer.py --cases example1 --reps 3 --out-name ppl_peer_example1.json
    python benchmarks/ppl_peer.py --cold-cache                 # dpposterior's very first run (empty numba cache)
    python benchmarks/ppl_peer.py --iters-per-second           # one chain of the Gaussian sampler, iterations/s

Engine ``dpposterior-2threads`` is the default ``infer`` with the machine's cores available
(chains on threads); ``dpposterior`` is the same call held to one thread (the fair comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CHAINS, WARMUP, DRAWS = 4, 1000, 5000
if os.environ.get("PPL_PEER_SMOKE"):  # smoke test of the plumbing only (tiny runs)
    WARMUP, DRAWS = 50, 100

ENGINES = {
    "example1": ["dpposterior", "dpposterior-2threads", "numpyro-centred", "numpyro-noncentred"],
    "binomial": ["dpposterior", "dpposterior-2threads", "numpyro-centred", "numpyro-noncentred", "numpyro-marginal"],
    "linreg": ["dpposterior", "dpposterior-2threads", "numpyro-integrated", "numpyro-centred",
               "numpyro-noncentred"],
}
SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    "JAX_PLATFORMS": "cpu", "JAX_ENABLE_X64": "1",
}


# ----------------------------------------------------------------------------- cases
def example1_release():
    from dpposterior.demo import bundled_release_path
    from dpposterior.release import load_release

    return load_release(bundled_release_path())


def example1_problem():
    from dpposterior.demo import PAPER_PRIOR
    from dpposterior.families.gaussian import parse_prior
    from dpposterior.inference import gaussian_gibbs as gg

    rel = example1_release()
    return rel, gg.problem_from_release(rel, parse_prior(PAPER_PRIOR, rel), False)


BINOMIAL = {"format": "dpposterior-release/1", "family": "binomial", "n": 100,
            "statistics": {"successes": {"value": 37.2, "mechanism": "laplace", "epsilon": 0.1}}}


def linreg_release():
    from dpposterior.families.linear_regression import default_prior, simulate

    from dpposterior.release import load_release

    return load_release(simulate(default_prior(5), 10_000, 1.0, np.random.default_rng(2024)).release)


def reference(case: str) -> dict:
    """Reference posterior mean and sd per parameter (data scale)."""
    if case == "example1":
        from dpposterior.inference import gaussian_grid as gr

        rel, prob = example1_problem()
        mu, s2 = gr.grid_draws(prob, 200_000, np.random.default_rng(0))
        lo, w = rel.bounds[0], rel.width
        mu, s2 = lo + w * mu, w**2 * s2
        return {"mu": [float(mu.mean()), float(mu.std())], "sigma2": [float(s2.mean()), float(s2.std())]}
    if case == "binomial":
        from scipy import stats

        n, y, b = 100, 37.2, 1.0 / 0.1
        th = (np.arange(20_000) + 0.5) / 20_000
        s = np.arange(n + 1)
        lik = (stats.binom.pmf(s[None, :], n, th[:, None]) * np.exp(-np.abs(y - s) / b)[None, :]).sum(axis=1)
        p = lik / lik.sum()
        m = float((p * th).sum())
        return {"theta": [m, float(np.sqrt((p * (th - m) ** 2).sum()))]}
    if case == "linreg":
        from dpposterior.families.linear_regression import default_prior
        from dpposterior.inference.linreg_common import nearest_psd

        data = linreg_release().regression_data()
        prior = default_prior(5)
        S, z, sz2 = nearest_psd(data.xtx)[0], data.xty[0], float(data.sigma_z[0] ** 2)
        d = S.shape[0]
        C, m = prior.theta_cov, prior.theta_mean
        # p(sigma^2 | zhat) on a log grid around its bulk
        grid = np.exp(np.linspace(np.log(1e-4), np.log(10.0), 4000))
        logp = np.empty(grid.size)
        means = np.empty((grid.size, d))
        covs = np.empty((grid.size, d, d))
        Ci = np.linalg.inv(C)
        for i, s2 in enumerate(grid):
            K = s2 * S + sz2 * np.eye(d)
            M = S @ C @ S + K
            r = z - S @ m
            sign, logdet = np.linalg.slogdet(M)
            logp[i] = (-(prior.a + 1) * np.log(s2) - prior.b / s2 - 0.5 * logdet - 0.5 * r @ np.linalg.solve(M, r)
                       + np.log(s2))  # + log s2: the grid is uniform in log s2
            Kinv = np.linalg.inv(K)
            P = S @ Kinv @ S + Ci
            covs[i] = np.linalg.inv(P)
            means[i] = covs[i] @ (S @ Kinv @ z + Ci @ m)
        p = np.exp(logp - logp.max())
        p /= p.sum()
        out = {}
        tm = (p[:, None] * means).sum(0)
        tv = (p[:, None] * (np.einsum("gii->gi", covs) + means**2)).sum(0) - tm**2
        for k in range(d):
            out[f"theta[{k}]"] = [float(tm[k]), float(np.sqrt(tv[k]))]
        sm = float((p * grid).sum())
        out["sigma2"] = [sm, float(np.sqrt((p * (grid - sm) ** 2).sum()))]
        return out
    raise ValueError(case)


# ----------------------------------------------------------------------------- engines (worker side)
def _dpposterior_run(case: str, seed: int):
    from dpposterior import infer
    from dpposterior.demo import PAPER_PRIOR

    if case == "example1":
        post = infer(example1_release(), prior=PAPER_PRIOR, seed=seed)
        return {"mu": post.posterior["mu"], "sigma2": post.posterior["sigma2"]}
    if case == "binomial":
        post = infer(BINOMIAL, seed=seed)
        return {"theta": post.posterior["p"]}
    if case == "linreg":
        post = infer(_LINREG_REL[0], method="mcmc-fixeds", seed=seed)
        th = post.posterior["theta"]
        out = {f"theta[{k}]": th[..., k] for k in range(th.shape[-1])}
        out["sigma2"] = post.posterior["sigma2"]
        return out
    raise ValueError(case)


_LINREG_REL: list = []


def _numpyro_model(case: str, variant: str):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    if case == "example1":
        _, p = example1_problem()
        n, ystar, s2star, b1, b2 = (float(p.n), float(p.ystar), float(p.s2star), float(p.b1), 1.0 / float(p.lam2))
        mu0, s0, k0, nu0 = float(p.mu0), float(p.sigma0_sq), float(p.kappa0), float(p.nu0)

        def model():
            s2 = numpyro.sample("sigma2", dist.InverseGamma(nu0 / 2.0, nu0 * s0 / 2.0))
            if variant == "centred":
                mu = numpyro.sample("mu", dist.Normal(mu0, jnp.sqrt(s2 / k0)))
                ybar = numpyro.sample("ybar", dist.Normal(mu, jnp.sqrt(s2 / n)))
                S2 = numpyro.sample("S2", dist.Gamma((n - 1) / 2.0, (n - 1) / (2.0 * s2)))
            else:
                zmu = numpyro.sample("zmu", dist.Normal(0.0, 1.0))
                mu = numpyro.deterministic("mu", mu0 + jnp.sqrt(s2 / k0) * zmu)
                zy = numpyro.sample("zy", dist.Normal(0.0, 1.0))
                ybar = mu + jnp.sqrt(s2 / n) * zy
                g = numpyro.sample("g", dist.Gamma((n - 1) / 2.0, (n - 1) / 2.0))
                S2 = s2 * g
            numpyro.sample("ystar", dist.Laplace(ybar, b1), obs=ystar)
            numpyro.sample("s2star", dist.Laplace(S2, b2), obs=s2star)
        rel = example1_release()
        # draws back on the data scale (Theorem 1): mu -> a + w mu, sigma^2 -> w^2 sigma^2
        return model, ("mu", "sigma2"), {"mu": (rel.bounds[0], rel.width), "sigma2": (0.0, rel.width**2)}

    if case == "binomial":
        n, y, b = 100.0, 37.2, 10.0

        def model():
            th = numpyro.sample("theta", dist.Beta(1.0, 1.0))
            sd = jnp.sqrt(n * th * (1.0 - th))
            if variant == "centred":
                s = numpyro.sample("s", dist.TruncatedNormal(n * th, sd, low=0.0, high=n))
            elif variant == "noncentred":
                z = numpyro.sample("z", dist.Normal(0.0, 1.0))
                s = n * th + sd * z
            else:
                ks = jnp.arange(101.0)
                lp = dist.Binomial(100, th).log_prob(ks) - jnp.abs(y - ks) / b - jnp.log(2 * b)
                numpyro.factor("y", jax_logsumexp(lp))
                return
            numpyro.sample("y", dist.Laplace(s, b), obs=y)
        return model, ("theta",), {}

    if case == "linreg":
        from dpposterior.families.linear_regression import default_prior
        from dpposterior.inference.linreg_common import nearest_psd

        data = _LINREG_REL[0].regression_data()
        prior = default_prior(5)
        S = jnp.asarray(nearest_psd(data.xtx)[0])
        z = jnp.asarray(data.xty[0])
        sz2 = float(data.sigma_z[0] ** 2)
        d = S.shape[0]
        m, C = jnp.asarray(prior.theta_mean), jnp.asarray(prior.theta_cov)
        LS = jnp.linalg.cholesky(S + 1e-12 * jnp.eye(d))

        def model():
            th = numpyro.sample("theta", dist.MultivariateNormal(m, C))
            s2 = numpyro.sample("sigma2", dist.InverseGamma(prior.a, prior.b))
            mean = S @ th
            if variant == "integrated":
                numpyro.sample("zhat", dist.MultivariateNormal(mean, s2 * S + sz2 * jnp.eye(d)), obs=z)
                return
            if variant == "centred":
                zz = numpyro.sample("z", dist.MultivariateNormal(mean, scale_tril=jnp.sqrt(s2) * LS))
            else:
                e = numpyro.sample("e", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
                zz = mean + jnp.sqrt(s2) * (LS @ e)
            numpyro.sample("zhat", dist.Normal(zz, jnp.sqrt(sz2)).to_event(1), obs=z)
        return model, tuple([f"theta[{k}]" for k in range(d)] + ["sigma2"]), {}
    raise ValueError(case)


def jax_logsumexp(x):
    from jax.scipy.special import logsumexp

    return logsumexp(x)


def _numpyro_runner(case: str, variant: str):
    import jax
    from numpyro.infer import MCMC, NUTS

    model, names, affine = _numpyro_model(case, variant)
    mcmc = MCMC(NUTS(model), num_warmup=WARMUP, num_samples=DRAWS, num_chains=CHAINS, chain_method="sequential",
                progress_bar=False)

    def run(seed):
        mcmc.run(jax.random.PRNGKey(seed))
        s = mcmc.get_samples(group_by_chain=True)
        out = {}
        for name in names:
            if name.startswith("theta["):
                out[name] = np.asarray(s["theta"])[..., int(name[6:-1])]
            else:
                out[name] = np.asarray(s[name])
            if name in affine:
                out[name] = affine[name][0] + affine[name][1] * out[name]
        return out
    return run


def _summary(draws: dict, seconds: float) -> dict:
    import arviz as az

    ess = {k: float(az.ess(np.asarray(v, float), method="bulk")) for k, v in draws.items()}
    return {"seconds": seconds, "ess": ess, "min_ess": min(ess.values()), "min_ess_per_s": min(ess.values()) / seconds,
            "moments": {k: [float(np.mean(v)), float(np.std(v))] for k, v in draws.items()}}


def worker(case: str, engine: str, rep: int) -> dict:
    t0 = time.perf_counter()
    if case == "linreg":
        _LINREG_REL.append(linreg_release())
    if engine.startswith("dpposterior"):
        # library imports, as NumPyro's side imports jax and numpyro before its timed calls: the
        # package, the engine modules and ArviZ (infer's convergence checks import it; its import
        # also compiles ArviZ's own numba ufuncs, uncached).  Reported as setup_seconds.
        import arviz  # noqa: F401

        import dpposterior.inference  # noqa: F401
        from dpposterior.inference import gaussian_gibbs, gibbs_ss, linreg_fixeds  # noqa: F401
        run = lambda seed: _dpposterior_run(case, seed)  # noqa: E731
    else:
        run = _numpyro_runner(case, engine.split("-", 1)[1])
    setup = time.perf_counter() - t0
    out = {"case": case, "engine": engine, "rep": rep, "setup_seconds": setup, "load1": os.getloadavg()[0]}
    for call, seed in (("first", 1000 * rep + 1), ("second", 1000 * rep + 2)):
        t = time.perf_counter()
        draws = run(seed)
        out[call] = _summary(draws, time.perf_counter() - t)
    return out


# ----------------------------------------------------------------------------- orchestration
def _spawn(case, engine, rep, cache_dir=None) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # our bytecode as an installed package has it (startup.py)
    if engine != "dpposterior-2threads":
        env.update(SINGLE_THREAD_ENV)
    else:
        env.update({k: v for k, v in SINGLE_THREAD_ENV.items() if k != "NUMBA_NUM_THREADS"})
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, __file__, "--worker", case, engine, str(rep)], env=env,
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        return {"case": case, "engine": engine, "rep": rep, "error": res.stderr[-2000:]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def _agreement(summary: dict, ref: dict) -> dict:
    zs = {k: abs(summary["moments"][k][0] - ref[k][0]) / ref[k][1] for k in ref}
    sds = {k: abs(summary["moments"][k][1] / ref[k][1] - 1.0) for k in ref}
    return {"max_abs_mean_error_in_sd": max(zs.values()), "max_rel_sd_error": max(sds.values())}


def iters_per_second(chains: int = 1, draws: int = 200_000, reps: int = 3) -> dict:
    """One chain of the Gaussian sampler (joint move on), Example 1, constrained and not."""
    from dpposterior.demo import PAPER_PRIOR
    from dpposterior.families.gaussian import parse_prior
    from dpposterior.inference import gaussian_gibbs as gg

    rel = example1_release()
    out = {}
    for constrained in (False, True):
        prob = gg.problem_from_release(rel, parse_prior(PAPER_PRIOR, rel), constrained)
        gg.run_chains(prob, 1, 100, 100, np.random.default_rng(0), workers=1)
        rates = []
        for r in range(reps):
            t = time.perf_counter()
            gg.run_chains(prob, chains, draws, 1000, np.random.default_rng(r), workers=1)
            rates.append((draws + 1000) * chains / (time.perf_counter() - t))
        out["constrained" if constrained else "unconstrained"] = {"iterations_per_s": rates,
                                                                  "load1": os.getloadavg()[0]}
    return out


def summarise(records, cases) -> dict:
    """Median over repetitions per (case, engine, call); ratio of dpposterior to the best NumPyro variant."""
    summary = {}
    for case in cases:
        for engine in ENGINES[case]:
            rs = [r for r in records if r["case"] == case and r["engine"] == engine and "error" not in r]
            if not rs:
                continue
            summary.setdefault(case, {})[engine] = {
                call: {"median_min_ess_per_s": float(np.median([r[call]["min_ess_per_s"] for r in rs])),
                       "median_seconds": float(np.median([r[call]["seconds"] for r in rs])),
                       "max_abs_mean_error_in_sd": float(max(r[call]["agreement"]["max_abs_mean_error_in_sd"]
                                                              for r in rs)),
                       "reps": len(rs)}
                for call in ("first", "second")}
        if case in summary:
            peers = {e: v for e, v in summary[case].items() if e.startswith("numpyro")}
            for engine in ("dpposterior", "dpposterior-2threads"):
                if engine in summary[case] and peers:
                    for call in ("first", "second"):
                        best = max(v[call]["median_min_ess_per_s"] for v in peers.values())
                        summary[case][engine][call]["ratio_to_best_numpyro"] = (
                            summary[case][engine][call]["median_min_ess_per_s"] / best)
    return summary


def markdown(result: dict) -> str:
    """Median min-ESS/s (first / second call), seconds, agreement, and the ratio to the best NumPyro."""
    lines = ["| case | engine | min-ESS/s first call | min-ESS/s second call | s first / second | "
             "max mean error (ref. sd) | × best NumPyro first / second | reps |", "|---|---|---|---|---|---|---|---|"]
    for case, engines in result["summary"].items():
        for engine, v in engines.items():
            f, s = v["first"], v["second"]
            ratio = (f"{f['ratio_to_best_numpyro']:.0f} / {s['ratio_to_best_numpyro']:.0f}"
                     if "ratio_to_best_numpyro" in f else "")
            err = max(f["max_abs_mean_error_in_sd"], s["max_abs_mean_error_in_sd"])
            lines.append(f"| {case} | {engine} | {f['median_min_ess_per_s']:,.0f} | {s['median_min_ess_per_s']:,.0f} | "
                         f"{f['median_seconds']:.2f} / {s['median_seconds']:.2f} | {err:.3f} | {ratio} | "
                         f"{f.get('reps', '')} |")
    loads = [r["load1"] for r in result["records"] if "load1" in r]
    if loads:
        lines.append("")
        lines.append(f"1-minute load average during the runs: {min(loads):.1f}–{max(loads):.1f} (2 cores).")
    return "\n".join(lines)


def main(argv=None):
    from _out import add_update_flag, results_dir

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", nargs=3, metavar=("CASE", "ENGINE", "REP"))
    ap.add_argument("--cases", nargs="+", default=list(ENGINES))
    ap.add_argument("--engines", nargs="+", default=None, help="restrict to these engines")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip", nargs="*", default=[], metavar="CASE:ENGINE", help="leave these pairs out")
    ap.add_argument("--cold-cache", action="store_true", help="dpposterior with an empty numba cache, per process")
    ap.add_argument("--iters-per-second", action="store_true")
    ap.add_argument("--out", default=None, help="folder for the result files")
    add_update_flag(ap)
    ap.add_argument("--out-name", default=None)
    ap.add_argument("--numpyro-from", nargs="+", default=None,
                    help="take NumPyro's records from these earlier result files (or their .partial)")
    ap.add_argument("--rep-offset", type=int, default=0, help="number the repetitions from here (seeds differ)")
    ap.add_argument("--table", default=None, metavar="RESULT_JSON", help="print a result file as markdown tables")
    args = ap.parse_args(argv)
    if args.table:
        print(markdown(json.loads(Path(args.table).read_text())))
        return
    if args.worker:
        case, engine, rep = args.worker
        print(json.dumps(worker(case, engine, int(rep))))
        return
    sys.path.insert(0, str(ROOT / "src"))
    out_dir = Path(args.out or results_dir(args.update_results))
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.iters_per_second:
        res = iters_per_second()
        print(json.dumps(res, indent=2))
        (out_dir / (args.out_name or "ppl_peer_iters.json")).write_text(json.dumps(res, indent=2) + "\n")
        return
    refs = {case: reference(case) for case in args.cases}
    records = []
    for rep in range(args.rep_offset, args.rep_offset + args.reps):
        for case in args.cases:
            engines = [e for e in ENGINES[case] if (args.engines is None or e in args.engines)
                       and f"{case}:{e}" not in args.skip]
            if args.cold_cache:
                engines = [e for e in engines if e.startswith("dpposterior")]
            for engine in engines:
                cache = tempfile.mkdtemp(prefix="numba-cold-") if args.cold_cache else None
                rec = _spawn(case, engine, rep, cache)
                if "error" not in rec:
                    for call in ("first", "second"):
                        rec[call]["agreement"] = _agreement(rec[call], refs[case])
                    print(f"rep {rep} {case:9s} {engine:22s} first {rec['first']['min_ess_per_s']:10.0f} "
                          f"second {rec['second']['min_ess_per_s']:10.0f} min-ESS/s  "
                          f"(t {rec['first']['seconds']:.2f}/{rec['second']['seconds']:.2f} s, "
                          f"err {rec['second']['agreement']['max_abs_mean_error_in_sd']:.3f} sd, "
                          f"load {rec['load1']:.2f})", flush=True)
                else:
                    print(f"rep {rep} {case} {engine} FAILED: {rec['error'][-500:]}", flush=True)
                records.append(rec)
                partial = out_dir / ((args.out_name or "ppl_peer.json") + ".partial")
                partial.write_text(json.dumps({"reference": refs, "records": records}, indent=1) + "\n")
    if args.numpyro_from:
        # NumPyro's records from an earlier run (its numbers do not depend on dpposterior's code)
        for fname in args.numpyro_from:
            prev = json.loads(Path(fname).read_text())
            for r in prev["records"]:
                if r["engine"].startswith("numpyro") and r["case"] in args.cases:
                    if "error" not in r:
                        for call in ("first", "second"):
                            r[call]["agreement"] = _agreement(r[call], refs[r["case"]])
                    records.append(r)
    summary = summarise(records, args.cases)
    result = {"chains": CHAINS, "warmup": WARMUP, "draws": DRAWS, "reps": args.reps, "cold_cache": args.cold_cache,
              "numpyro_from": args.numpyro_from,
              "reference": refs, "summary": summary, "records": records,
              "machine": {"cpus": os.cpu_count(), "uname": " ".join(os.uname())}}
    name = args.out_name or ("ppl_peer_cold.json" if args.cold_cache else "ppl_peer.json")
    (out_dir / name).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
