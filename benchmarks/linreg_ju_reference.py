"""Brute-force reference posteriors for linreg-ju (Xiong, Ju & Zhang Sec. 4.2, Tables 2-4).

The likelihood of the release is p(s_dp | beta) = E_{s ~ p(s | beta)}[prod_j Laplace(s_dp,j - s_j; b)]
with b = Delta/eps: an expectation over the (cheap, n = 100) data simulator.  Averaging the
Laplace density over L simulated statistics is an unbiased estimate of it, so importance
sampling with those estimates as weights (pseudo-marginal IS) is a consistent reference that needs
no ABC tolerance and no flow.  Two stages: a pilot with the N(0, I_3) prior as proposal, then a
multivariate Student-t (5 d.o.f.) proposal with the pilot's weighted mean and 1.5^2 x its
covariance (heavier tails than the posterior, so the weights stay bounded).  Monte Carlo error is reported
(standard errors of the means and quantiles by a batch bootstrap over proposal draws, ESS).

    python benchmarks/linreg_ju_reference.py [--problems linreg-ju-eps10,linreg-ju-eps1,linreg-ju-eps0.1]
        [--proposals 20000] [--inner 1000] [--seed 0]

Prints, per release, the reference mean (2.5%, 97.5%) of beta_0..2 beside the paper's SMC-ABC,
SPPE and SPLE rows and the largest deviation of each; saves draws to
benchmarks/results/isref_<problem>.npz (weighted proposals) for sbi_convergence.py.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy import stats
from scipy.special import logsumexp

from dpposterior.families import get_family
from dpposterior.families.linreg_ju import simulate_statistics
from dpposterior.release import load_release

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def estimate_loglik(beta, observed, scale, n, design, inner, rng, chunk=8):
    """log of (1/L) sum_l prod_j Laplace(observed_j - s_lj; scale) per row of beta, and the
    log of the two half-sample estimates (for the Monte Carlo variance of the estimator)."""
    out = np.empty(len(beta))
    halves = np.empty((len(beta), 2))
    for start in range(0, len(beta), chunk):
        b = beta[start:start + chunk]
        s = simulate_statistics(np.repeat(b, inner, axis=0), rng, n, design).reshape(len(b), inner, -1)
        logk = (-np.abs(observed - s) / scale - np.log(2 * scale)).sum(axis=-1)     # (chunk, L)
        out[start:start + chunk] = logsumexp(logk, axis=1) - np.log(inner)
        h = inner // 2
        halves[start:start + chunk, 0] = logsumexp(logk[:, :h], axis=1) - np.log(h)
        halves[start:start + chunk, 1] = logsumexp(logk[:, h:], axis=1) - np.log(inner - h)
    return out, halves


def weighted_quantile(x, w, q):
    order = np.argsort(x)
    cw = np.cumsum(w[order])
    return np.interp(q, (cw - 0.5 * w[order]) / cw[-1], x[order])


def rows(theta, w):
    w = w / w.sum()
    return [(float(w @ c), float(weighted_quantile(c, w, 0.025)), float(weighted_quantile(c, w, 0.975)))
            for c in theta.T]


def main():
    from _out import add_update_flag, results_dir
    from sbi_convergence import PAPER  # the paper's Tables 2-4 rows

    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", default="linreg-ju-eps10,linreg-ju-eps1,linreg-ju-eps0.1")
    ap.add_argument("--proposals", type=int, default=20000)
    ap.add_argument("--inner", type=int, default=1000)
    ap.add_argument("--pilot", type=int, default=5000)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    add_update_flag(ap)
    args = ap.parse_args()
    folder = results_dir(args.update_results)
    print(f"(results go to {folder})", flush=True)
    summary_path = folder / "linreg_ju_reference.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for problem in args.problems.split(","):
        rel = load_release(ROOT / "examples" / "releases" / f"{problem}.json")
        fam = get_family(rel.family)
        model = fam.hooks["sbi_model"](rel, fam.parse_prior(None, rel))
        rng = np.random.default_rng(np.random.SeedSequence([args.seed, len(problem)]))
        t0 = time.perf_counter()
        pilot = model.prior.sample(args.pilot, rng)
        pilot_ll, _ = estimate_loglik(pilot, model.observed, model.mechanism.scale, rel.n, rel.design,
                                      args.inner, rng)
        pw = np.exp(pilot_ll - pilot_ll.max())
        center = np.average(pilot, axis=0, weights=pw)
        proposal = stats.multivariate_t(center, 1.5 ** 2 * np.cov(pilot.T, aweights=pw), df=5, seed=rng)
        beta = proposal.rvs(args.proposals)
        loglik, halves = estimate_loglik(beta, model.observed, model.mechanism.scale, rel.n, rel.design,
                                         args.inner, rng)
        seconds = time.perf_counter() - t0
        log_weight = loglik + model.prior.log_prob(beta) - proposal.logpdf(beta)
        w = np.exp(log_weight - log_weight.max())
        ess = w.sum() ** 2 / (w ** 2).sum()
        # relative MC error of one likelihood estimate, from its two halves (weighted by the posterior)
        rel_err = np.exp(halves[:, 0] - halves[:, 1]) - 1
        lik_cv = float(np.sqrt(np.average(rel_err ** 2, weights=w) / 2))
        ref = rows(beta, w)
        # batch bootstrap over proposals: standard error of each reported number
        batches = np.array_split(np.arange(args.proposals), args.batches)
        boot = np.array([rows(beta[np.concatenate([batches[i] for i in pick])],
                              w[np.concatenate([batches[i] for i in pick])])
                         for pick in np.random.default_rng(1).integers(0, args.batches, (200, args.batches))])
        se = boot.std(axis=0)
        print(f"\n{problem}: {args.pilot} + {args.proposals} proposals x {args.inner} simulations ({seconds:.0f} s), "
              f"ESS {ess:.0f}, likelihood-estimate CV {lik_cv:.3f}; max MC s.e. {se.max():.3f}")
        print("  reference (pseudo-marginal IS):  " + "  ".join(f"{m:6.2f} ({lo:6.2f}, {hi:5.2f})"
                                                           for m, lo, hi in ref))
        devs = {}
        for method, paper in PAPER.get(problem, {}).items():
            dev = max(abs(a - b) for r1, r2 in zip(ref, paper) for a, b in zip(r1, r2))
            devs[method] = dev
            print(f"  paper {method:8s}                 " + "  ".join(f"{m:6.2f} ({lo:6.2f}, {hi:5.2f})"
                                                                 for m, lo, hi in paper)
                  + f"   max |paper - reference| = {dev:.2f}")
        np.savez(folder / f"isref_{problem}.npz", theta=beta, log_weight=log_weight, seconds=seconds)
        summary[problem] = {"rows": ref, "se": se.tolist(), "ess": ess, "likelihood_cv": lik_cv,
                            "seconds": seconds, "paper_deviation": devs, "proposals": args.proposals,
                            "pilot": args.pilot, "inner": args.inner}
        summary_path.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
