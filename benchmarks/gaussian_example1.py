"""Kazan & Reiter, Example 1 (blood lead): our 95% HPD intervals beside the paper's.

Prints, for the paper's NIG prior and for the flat prior, constrained and unconstrained:
the 95% HPD intervals of mu and sigma^2 from the Gibbs sampler (joint move on, 64 chains)
and from the grid oracle, and -- to explain the differences -- from the plain App. D
sweep run with the paper's printed sigma^2 conditional (eq. 38/49/54).  For the flat
prior it prints the posterior modes and the share of draws outside the feasible region,
which the paper reports qualitatively (Sec. 4.1, Figure 3).

    python benchmarks/gaussian_example1.py
"""

from __future__ import annotations

import numpy as np

PAPER = {  # Sec. 3.2: 95% HPD intervals, 5,000 Gibbs iterations
    ("normal-inverse-gamma", True): {"mu": (1.9, 42.0), "sigma2": (1.0**2, 39.3**2)},
    ("normal-inverse-gamma", False): {"mu": (3.4, 48.2), "sigma2": (1.2**2, 50.8**2)},
}


def hpd(x, prob=0.95):
    from dpposterior.diagnostics.gaussian_study import hpd as _hpd

    lo, hi = _hpd(np.asarray(x)[None, :], prob)
    return float(lo[0]), float(hi[0])


def fmt(name, iv):
    if name == "sigma2":
        return f"[{np.sqrt(iv[0]):.1f}^2, {np.sqrt(iv[1]):.1f}^2]"
    return f"[{iv[0]:.1f}, {iv[1]:.1f}]"


def mode2d(mu, s2):
    h, xe, ye = np.histogram2d(mu, np.sqrt(s2), bins=60)
    i, j = np.unravel_index(np.argmax(h), h.shape)
    return 0.5 * (xe[i] + xe[i + 1]), 0.5 * (ye[j] + ye[j + 1])


def main():
    from dpposterior import infer
    from dpposterior.demo import PAPER_PRIOR, bundled_release_path
    from dpposterior.families.gaussian import parse_prior
    from dpposterior.inference import gaussian_gibbs as gg
    from dpposterior.inference import gaussian_grid as gr
    from dpposterior.release import load_release

    release = load_release(bundled_release_path())
    a, b = release.bounds
    for prior_dict in (PAPER_PRIOR, {"kind": "flat"}):
        kind = prior_dict["kind"]
        prior = parse_prior(prior_dict, release)
        for constrained in (True, False):
            label = f"{kind}, {'constrained' if constrained else 'unconstrained'}"
            post = infer(release, prior=prior_dict, constrained=constrained, chains=64, draws=2000, warmup=500,
                         seed=1)
            mu, s2 = post.draws("mu"), post.draws("sigma2")
            prob = gg.problem_from_release(release, prior, constrained)
            gmu, gs2 = gr.grid_draws(prob, 400_000, np.random.default_rng(0))
            gmu, gs2 = a + (b - a) * gmu, (b - a) ** 2 * gs2
            print(f"{label}")
            for name, ours, grid in (("mu", mu, gmu), ("sigma2", s2, gs2)):
                line = f"  {name:6s} gibbs {fmt(name, hpd(ours)):22s} grid {fmt(name, hpd(grid)):22s}"
                if (kind, constrained) in PAPER:
                    prob_p = gg.problem_from_release(release, prior, constrained)
                    prob_p.paper_sigma2 = True
                    res = gg.run_chains(prob_p, 64, 5000, 1000, np.random.default_rng(2), joint_update=False)
                    pv = (a + (b - a) * res["mu"].ravel()) if name == "mu" else (b - a) ** 2 * res["sigma2"].ravel()
                    line += (f" paper-form sampler {fmt(name, hpd(pv)):22s}"
                             f" paper {fmt(name, PAPER[(kind, constrained)][name])}")
                    # what 5,000 iterations of one paper-form chain give: 40 independent replicates
                    short = gg.run_chains(prob_p, 40, 5000, 0, np.random.default_rng(3), joint_update=False)
                    sv = (a + (b - a) * short["mu"]) if name == "mu" else (b - a) ** 2 * short["sigma2"]
                    ends = np.array([hpd(row) for row in sv])
                    lo_q = np.percentile(ends[:, 0], [10, 90])
                    hi_q = np.percentile(ends[:, 1], [10, 90])
                    if name == "sigma2":
                        lo_q, hi_q = np.sqrt(lo_q), np.sqrt(hi_q)
                    line += (f"\n         single 5,000-iteration paper-form chains (10-90% of 40 runs): lower end "
                             f"{lo_q[0]:.1f}..{lo_q[1]:.1f}, upper end {hi_q[0]:.1f}..{hi_q[1]:.1f}"
                             f"{' (sigma)' if name == 'sigma2' else ''}")
                print(line)
            m_mu, m_sd = mode2d(mu, s2)
            infeasible = np.mean((mu < a) | (mu > b) | (s2 > (mu - a) * (b - mu)))
            print(f"  posterior mode ~ (mu {m_mu:.1f}, sigma {m_sd:.1f});  draws outside the feasible region: "
                  f"{100 * infeasible:.1f}%")


if __name__ == "__main__":
    main()
