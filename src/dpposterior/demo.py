"""``dpposterior demo``: the blood-lead release of Kazan & Reiter, Example 1 (Sec. 3.2, Figure 1).

n = 43 policemen, bounds [0, 100] ug/dL, eps1 = eps2 = 0.25, released Ybar* = 34.30 and
S2* = 47.16^2; the analyst's prior is normal-inverse-gamma with mu0 = 12.5,
sigma0^2 = 3.8^2, kappa0 = 1, nu0 = 1 (the paper's Example 1).  The demo runs the exact
Gibbs sampler with and without the constraints of Theorems 2-3, prints both summaries
beside the naive (noise-ignoring) posterior, and writes under DIR:

* ``posterior_constrained.nc``, ``posterior_unconstrained.nc`` (ArviZ netCDF),
* ``joint_posterior.png`` -- the joint posterior of (mu, sigma^2) with the feasible
  region sigma^2 <= (mu - a)(b - mu) shaded (like Figure 1).
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

import numpy as np

PAPER_PRIOR = {"kind": "normal-inverse-gamma", "mu0": 12.5, "sigma0_sq": 3.8**2, "kappa0": 1.0, "nu0": 1.0}
CONFIDENTIAL = {"mean": 32.08, "variance": 16.98**2}  # the unreleased statistics the paper reports


def bundled_release_path() -> Path:
    return Path(str(resources.files("dpposterior") / "data" / "blood_lead_release.json"))


def run_demo(out, draws: int = 1250, warmup: int = 400, chains: int = 16, seed: int = 1, quiet: bool = False):
    from rich.console import Console

    from .api import infer
    from .release import load_release
    from .console import print_posterior_summary

    console = Console(highlight=False, soft_wrap=True, quiet=quiet)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    release = load_release(bundled_release_path())
    console.print(f"Kazan & Reiter, Example 1: n = {release.n}, bounds {list(release.bounds)}, "
                  f"eps1 = eps2 = 0.25, Ybar* = {release.statistics.mean.value:g}, "
                  f"S2* = {np.sqrt(release.statistics.variance.value):.2f}^2")
    console.print("prior: normal-inverse-gamma mu0 = 12.5, sigma0^2 = 3.8^2, kappa0 = 1, nu0 = 1 (the paper's)")
    posts = {}
    for constrained in (True, False):
        label = "constrained" if constrained else "unconstrained"
        post = infer(release, prior=PAPER_PRIOR, constrained=constrained, draws=draws, warmup=warmup,
                     chains=chains, seed=seed)
        naive = infer(release, prior=PAPER_PRIOR, method="naive", constrained=constrained, draws=draws,
                      chains=chains, seed=seed)
        console.print(f"\n[bold]{label}[/bold]")
        print_posterior_summary(post, naive=naive, console=console)
        path = out / f"posterior_{label}.nc"
        post.to_netcdf(path)
        posts[label] = post
        console.print(f"wrote {path}")
    png = out / "joint_posterior.png"
    plot_joint(posts, release, png)
    console.print(f"wrote {png}  ({time.perf_counter() - start:.1f} s)")
    return posts


def plot_joint(posts, release, path) -> None:
    """Figure-1-like panels: draws of (mu, sigma^2) over the shaded feasible region."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lo, hi = release.bounds
    fig, axes = plt.subplots(2, 1, figsize=(6.5, 8), sharex=True)
    mu_grid = np.linspace(lo, hi, 400)
    for ax, label in zip(axes, ("constrained", "unconstrained")):
        post = posts[label]
        mu = post.draws("mu")
        sd = np.sqrt(post.draws("sigma2"))
        ax.fill_between(mu_grid, 0, np.sqrt((mu_grid - lo) * (hi - mu_grid)), color="0.88",
                        label="feasible region (Theorem 2)")
        ax.scatter(mu, sd, s=2, alpha=0.25, color="tab:blue", rasterized=True, label="posterior draws")
        ax.plot(release.statistics.mean.value, np.sqrt(max(release.statistics.variance.value, 0)), "o",
                color="red", ms=8, label="released (Ybar*, S*)")
        ax.plot(CONFIDENTIAL["mean"], np.sqrt(CONFIDENTIAL["variance"]), "^", color="green", ms=8,
                label="unreleased (Ybar, S)")
        ax.plot(PAPER_PRIOR["mu0"], np.sqrt(PAPER_PRIOR["sigma0_sq"]), "s", color="purple", ms=7,
                label="prior (mu0, sigma0)")
        ax.set_title(f"{label} (Kazan & Reiter, Example 1)")
        ax.set_ylabel("sigma (ug/dL)")
        ax.set_xlim(lo - 0.25 * (hi - lo), hi + 0.25 * (hi - lo))
        ax.set_ylim(0, 1.2 * (hi - lo))
    axes[-1].set_xlabel("mu (ug/dL)")
    axes[0].legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    from .files import atomic_path

    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(fig)
