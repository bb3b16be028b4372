"""Figure 7 of Xiong, Ju & Zhang: RMSE of the inner integral I(theta, x) vs M, MC and RQMC.

The paper (Sec. 3.4, eqs. 11-12; App. E.1.1, Figure 7) estimates
I(theta, x) = int eta(s_dp | s(x)) g(s_dp, theta) ds_dp = int_[0,1]^r g(tau(v, s(x)), theta) dv
with g = log q_phi, q_phi a neural spline flow, "on the SIR model and linear regression
example"; it reports RMSE ~ M^-1/2 for MC and ~ M^-1 for RQMC.  The text gives neither the M
range nor the (theta, x) pairs nor the state of the flow, and the authors' public code has no
script for the figure, so this benchmark reproduces the stated setting:

1. **Figure 7 (paper setting).**  For each ``--problem`` (``linreg-ju-eps10``: r = 9 Laplace
   coordinates; ``sir-eps10``: r = 10 binomial-trajectory coordinates) a likelihood flow is
   trained for one short SPLE round; for ``--pairs`` (theta, x) from the prior predictive the
   integrand is log q(tau(v, s(x)) | theta).  For M = 2 .. 2^``--max-log2m`` the estimator (11)
   is computed ``--reps`` times with fresh i.i.d. uniforms (MC) and with fresh independently
   scrambled Sobol' sets (RQMC), both from ``dpposterior.sbi.rqmc.inner_uniforms``, side by side.
   Both estimators are unbiased, so RMSE = standard deviation over the repetitions (pooled over
   pairs): no reference integral is needed (a single high-M reference would add an error that is
   shared by all repetitions and flattens the large-M end).
2. **Rate vs dimension, same integrand.**  Only the first k of the r uniforms vary (the others
   are fixed at one random point per pair), k in ``--active``.
3. **Rate vs smoothness and dimension, exact integrals** (``--synthetic``): integrands
   g(tau(v)) on [0,1]^d, d in 1, 2, 4, 9, whose integral is known in closed form (or by 1-d
   quadrature), RMSE against the exact value.

Log-log slopes are least-squares fits of log RMSE on log M over all M and over M >= 32; their
standard errors come from a bootstrap over the repetitions (``--boot`` resamples; each
repetition is an independent scrambling).

    python benchmarks/rqmc_ablation.py --problem linreg-ju-eps10,sir-eps10 --pairs 4 --reps 24
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from scipy import integrate, stats

from dpposterior.families import get_family
from dpposterior.sbi.sple import run_sple
from dpposterior.release import load_release
from dpposterior.sbi.flows import FlowConfig
from dpposterior.sbi.rqmc import inner_uniforms

ROOT = Path(__file__).resolve().parents[1]
#: lower end of the "asymptotic" fit (M >= 32)
ASYMPTOTIC_FROM = 32


# --------------------------------------------------------------------------- slopes

def rmse_curve(errors: np.ndarray, centred: bool) -> np.ndarray:
    """errors (pairs, n_M, reps) -> RMSE per M, pooled over pairs.

    centred=True: the values are estimates of an unknown but unbiasedly estimated integral, the
    RMSE is the standard deviation over repetitions (ddof=1); otherwise errors vs the exact value.
    """
    if centred:
        return np.sqrt(np.mean(np.var(errors, axis=-1, ddof=1), axis=0))
    return np.sqrt(np.mean(np.square(errors), axis=(0, -1)))


def fit_slope(ms: np.ndarray, rmse: np.ndarray, lo: int = 1):
    """Least-squares slope of log RMSE on log M over M >= lo; rmse (n_M,) or (n_curves, n_M)."""
    keep = ms >= lo
    slope = np.polyfit(np.log(ms[keep]), np.log(np.atleast_2d(rmse)[:, keep]).T, 1)[0]
    return float(slope[0]) if rmse.ndim == 1 else slope


def slopes_with_se(ms, errors, centred, rng, boot):
    """(slope all M, se, slope M >= 32, se) with a bootstrap over the repetitions."""
    reps = errors.shape[-1]
    point = rmse_curve(errors, centred)
    curves = np.empty((boot, len(ms)))
    for b in range(boot):
        idx = rng.integers(0, reps, size=(len(ms), reps))
        resampled = np.take_along_axis(errors, np.broadcast_to(idx, errors.shape), axis=-1)
        curves[b] = rmse_curve(resampled, centred)
    out = []
    for lo in (1, ASYMPTOTIC_FROM):
        out.append(fit_slope(ms, point, lo))
        out.append(float(np.std(fit_slope(ms, curves, lo), ddof=1)))
    return tuple(out), point


def fmt(s):
    return f"{s[0]:+.2f} ± {s[1]:.2f}"


# --------------------------------------------------------------------------- 1. the flow integrand

def flow_integrand(problem: str, pairs: int, seed: int):
    rel = load_release(ROOT / "examples" / "releases" / f"{problem}.json")
    fam = get_family(rel.family)
    model = fam.hooks["sbi_model"](rel, fam.parse_prior(None, rel))
    # one short SPLE round (500 simulations, <= 15 epochs): the integrand is the flow's log q
    res = run_sple(model, simulations=500, rounds=1, rqmc_points=8, draws=10, seed=seed,
                   config=FlowConfig(max_epochs=15), chains=10, warmup=2)
    flow = res.flow
    rng = np.random.default_rng(seed + 1)
    theta = model.prior.sample(pairs, rng)
    s = model.statistics(theta, rng)
    fixed = rng.random((pairs, model.stat_dim))  # inactive coordinates of the k-active study

    @torch.no_grad()
    def estimate(i: int, u: np.ndarray, k: int) -> np.ndarray:
        """u (reps, M, k) -> (reps,) estimates (11) of I(theta_i, x_i); coordinates >= k fixed."""
        reps, m, _ = u.shape
        full = np.broadcast_to(fixed[i], (reps, m, model.stat_dim)).copy()
        full[..., :k] = u
        sdp = model.privatize_u(s[i], full).reshape(reps * m, -1)
        th = torch.as_tensor(np.repeat(theta[i][None, :], reps * m, 0), dtype=torch.float32)
        lq = flow.log_prob(torch.as_tensor(sdp, dtype=torch.float32), th).double().numpy()
        return lq.reshape(reps, m).mean(1)

    return model, estimate


def run_flow(estimate, pairs, k, ms, reps, rng):
    """estimates (method, pairs, n_M, reps) for MC and RQMC side by side."""
    est = np.empty((2, pairs, len(ms), reps))
    for j, m in enumerate(ms):
        for i in range(pairs):
            for a, rqmc in enumerate((False, True)):
                est[a, i, j] = estimate(i, inner_uniforms(reps, int(m), k, rng, rqmc=rqmc), k)
    return est


# --------------------------------------------------------------------------- 3. exact integrands

def _quad01(f):
    # split at 1/2 (the Laplace inverse CDF changes branch there) and let quad handle the log ends
    return sum(integrate.quad(f, a, b, limit=400, epsabs=1e-13, epsrel=1e-12)[0] for a, b in ((0, .5), (.5, 1)))


def synthetic_cases(d: int):
    """name -> (integrand f(u) for u (..., d), exact integral, what it models)."""
    centre = np.linspace(-0.5, 0.5, d) if d > 1 else np.array([0.3])
    # equicorrelated precision (rho = 0.5): pairwise interactions, like the log of a correlated density
    precision = 0.5 * np.eye(d) + 0.5 * np.ones((d, d))
    lap, gau = stats.laplace.ppf, stats.norm.ppf

    def quadratic(t):
        return -0.5 * np.einsum("...i,ij,...j->...", t, precision, t)

    def quadratic_exact(m1, m2):
        # E[t_i t_j] = m1_i m1_j (independent coordinates), E[t_i^2] = m2_i
        moments = np.outer(m1, m1)
        np.fill_diagonal(moments, m2)
        return -0.5 * float(np.sum(precision * moments))

    cases = {}
    # bounded and smooth in v (tanh o Laplace quantile has bounded derivatives)
    h = lambda z: np.tanh(z)  # noqa: E731
    m1 = np.array([_quad01(lambda v, c=c: h(lap(v) + c)) for c in centre])
    m2 = np.array([_quad01(lambda v, c=c: h(lap(v) + c) ** 2) for c in centre])
    cases["Laplace tau, bounded smooth g (tanh, quadratic)"] = (
        lambda u: quadratic(h(lap(u) + centre)), quadratic_exact(m1, m2))
    # Gaussian noise: Phi^-1(v)^2 ~ 2 log(1/v), one log singularity at the faces
    cases["Gaussian tau, quadratic g (log-Gaussian density)"] = (
        lambda u: quadratic(gau(u) + centre), quadratic_exact(centre, 1 + centre ** 2))
    # the Laplace log-likelihood itself: |z - a| ~ |log v| at the faces, kink inside
    cases["Laplace tau, g = -sum|s - a| (Laplace log-lik.)"] = (
        lambda u: -np.abs(lap(u) + centre).sum(-1), -float(np.sum(np.abs(centre) + np.exp(-np.abs(centre)))))
    # the flow's Gaussian tails: log q quadratic in s_dp, (Laplace quantile)^2 ~ log(v)^2
    cases["Laplace tau, quadratic g (log-Gaussian density)"] = (
        lambda u: quadratic(lap(u) + centre), quadratic_exact(centre, 2 + centre ** 2))
    # interactions of every order between log-singular coordinates
    cases["Laplace tau, product g = prod(1 + 0.3 s_i)"] = (
        lambda u: np.prod(1 + 0.3 * (lap(u) + centre), axis=-1), float(np.prod(1 + 0.3 * centre)))
    # SIR-like discrete mechanism: Binomial(1000, p)/1000 quantiles (steps), p from the eps=10 SIR release
    p = np.array([0.263, 0.031, 0.123, 0.614, 0.047, 0.018, 0.009, 0.005, 0.003])[:d]
    trials = 1000
    cdf = stats.binom.cdf(np.arange(trials + 1)[:, None], trials, p)          # (N+1, d)
    sd = np.sqrt(p * (1 - p) / trials)

    def binom_z(u):
        # quantile = smallest k with F(k) >= u (clipped: the float cdf may end a hair below 1)
        k = np.stack([np.searchsorted(cdf[:, j], u[..., j], side="left") for j in range(d)], -1)
        k = np.minimum(k, trials)
        return (k / trials - p) / sd

    cases["binomial tau (SIR), quadratic g"] = (
        lambda u: quadratic(binom_z(u) + centre), quadratic_exact(centre, 1 + centre ** 2))
    return cases


def run_synthetic(dims, ms, reps, rng, boot):
    table = {}
    for d in dims:
        for name, (f, exact) in synthetic_cases(d).items():
            err = np.empty((2, 1, len(ms), reps))
            for j, m in enumerate(ms):
                for a, rqmc in enumerate((False, True)):
                    u = inner_uniforms(reps, int(m), d, rng, rqmc=rqmc)
                    err[a, 0, j] = f(u).mean(-1) - exact
            table[name, d] = [slopes_with_se(ms, err[a], False, rng, boot)[0] for a in range(2)]
    return table


# --------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", default="linreg-ju-eps10",
                    help="release(s) in examples/releases, comma-separated (e.g. linreg-ju-eps10,sir-eps10)")
    ap.add_argument("--pairs", type=int, default=5, help="(theta, x) pairs from the prior predictive")
    ap.add_argument("--reps", type=int, default=40, help="independent repetitions (scramblings) per M")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-log2m", type=int, default=10, help="largest M = 2^this for the flow integrand")
    ap.add_argument("--active", default="1,2,4",
                    help="k-active study of the flow integrand: comma-separated k ('none' to skip)")
    ap.add_argument("--synthetic", action=argparse.BooleanOptionalAction, default=True,
                    help="the exact-integral study of rate vs smoothness and dimension")
    ap.add_argument("--synthetic-log2m", type=int, default=12)
    ap.add_argument("--synthetic-reps", type=int, default=100, help="scramblings per M in the exact study")
    ap.add_argument("--boot", type=int, default=400, help="bootstrap resamples for slope standard errors")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(np.random.SeedSequence(args.seed).spawn(1)[0])
    ms = 2 ** np.arange(1, args.max_log2m + 1)
    t0 = time.time()

    for problem in args.problem.split(","):
        model, estimate = flow_integrand(problem, args.pairs, args.seed)
        r = model.stat_dim
        print(f"\n## Figure 7, {problem}: g = log q (short SPLE flow), r = {r}, "
              f"{args.pairs} pairs x {args.reps} repetitions")
        est = run_flow(estimate, args.pairs, r, ms, args.reps, rng)
        (mc, mc_curve), (rq, rq_curve) = (slopes_with_se(ms, est[a], True, rng, args.boot) for a in range(2))
        print(f"{'M':>6s} {'RMSE MC':>10s} {'RMSE RQMC':>10s} {'RQMC/MC':>8s}")
        for j, m in enumerate(ms):
            print(f"{m:6d} {mc_curve[j]:10.5f} {rq_curve[j]:10.5f} {rq_curve[j] / mc_curve[j]:8.3f}")
        print(f"log-log slope mc:   {fmt(mc[:2])} (all M), {fmt(mc[2:])} (M >= {ASYMPTOTIC_FROM})")
        print(f"log-log slope rqmc: {fmt(rq[:2])} (all M), {fmt(rq[2:])} (M >= {ASYMPTOTIC_FROM})")
        if args.active != "none":
            print(f"\n### {problem}: same integrand, only the first k of r = {r} uniforms vary")
            print(f"{'k':>3s} {'MC all M':>14s} {'RQMC all M':>14s} {'RQMC M>=32':>14s}")
            for k in [int(a) for a in args.active.split(",")] + [r]:
                e = est if k == r else run_flow(estimate, args.pairs, k, ms, args.reps, rng)
                s_mc, s_rq = (slopes_with_se(ms, e[a], True, rng, args.boot)[0] for a in range(2))
                print(f"{k:3d} {fmt(s_mc[:2]):>14s} {fmt(s_rq[:2]):>14s} {fmt(s_rq[2:]):>14s}")
        print(f"[{time.time() - t0:.0f} s]")

    if args.synthetic:
        sms = 2 ** np.arange(1, args.synthetic_log2m + 1)
        dims = (1, 2, 4, 9)
        print(f"\n## Exact integrals: RQMC slope (all M / M >= {ASYMPTOTIC_FROM}), M = 2..{sms[-1]}, "
              f"{args.synthetic_reps} scramblings")
        table = run_synthetic(dims, sms, args.synthetic_reps, rng, args.boot)
        names = list(dict.fromkeys(n for n, _ in table))
        print(f"{'integrand':50s} " + " ".join(f"{'d = ' + str(d):>22s}" for d in dims))
        for n in names:
            cells = [f"{fmt(table[n, d][1][:2])} / {table[n, d][1][2]:+.2f}" for d in dims]
            print(f"{n:50s} " + " ".join(f"{c:>22s}" for c in cells))
        mc_all = np.array([v[0][0] for v in table.values()])
        print(f"MC slopes (all cases): {mc_all.min():+.2f} .. {mc_all.max():+.2f}")
        print(f"[{time.time() - t0:.0f} s]")


if __name__ == "__main__":
    main()
