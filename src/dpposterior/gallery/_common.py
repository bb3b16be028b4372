"""What every gallery entry shares: the papers' own numbers (:data:`PAPER`), the run context and result,
checkpointed cells, seeds and table helpers."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import InputError


# =============================================================================== the papers' numbers

PAPER: dict[str, Any] = {
    # Kazan & Reiter, Sec. 3.2 (Example 1): 95% HPD intervals, NIG prior mu0 = 12.5, sigma0 = 3.8,
    # kappa0 = nu0 = 1, bounds [0, 100], n = 43, eps1 = eps2 = 0.25; 5,000 Gibbs iterations.
    "kazan-example1": {
        ("mu", True): (1.9, 42.0), ("mu", False): (3.4, 48.2),
        ("sigma", True): (1.0, 39.3), ("sigma", False): (1.2, 50.8),   # sigma^2 HPD = these squared
    },
    # Kazan & Reiter, Sec. 4 / Fig. 2 (flat prior, eps1 = eps2 = 0.1, 10,000 datasets, 20,000 iterations):
    "kazan-coverage": [
        "unconstrained: coverage of the 95% HPD interval of mu about 0.95 at every n",
        "constrained: average interval length < 0.75 at every point",
        "unconstrained: average interval length > 1 for every n <= 50",
        "constrained, small n: coverage below 0.95 when mu = 0.1 (near the boundary), near 1 when mu = 0.5",
        "large n: constrained and unconstrained agree",
    ],
    # Bernstein & Sheldon 2018, Fig. 1a (figure only; claims from Sec. 4):
    "bernstein-calibration": [
        "Gibbs-SS is as calibrated as the non-private posterior (KS within noise) at every n and epsilon",
        "naive is badly miscalibrated when n * epsilon is small, and improves as n grows",
    ],
    # Karwa, Kifer & Slavkovic, Sec. 5 / Fig. 1 (figure only):
    "karwa-mse": [
        "the private VB estimator beats the naive estimator in squared error",
        "the VB error is still higher than the non-private estimator's",
        "gains of VB over naive are largest at very small epsilon and small N",
        "as epsilon grows the three estimators behave alike",
    ],
    # Alparslan, Yildirim & Birbil, Sec. 5.1 / Fig. 2 (n = 1e5; 50 runs):
    "alparslan-simulated": {
        "nonprivate_estimation_mse": {2: 2.92e-5, 5: 1.54e-5},
        "nonprivate_prediction_mse": {2: 9.60e-5, 5: 4.19e-5},
        "claims": [
            "MCMC-fixedS and Bayes-fixedS-fast outperform adaSSP and MCMC-B&S in almost all cases",
            "MCMC-normalX clearly ahead of MCMC-B&S at d = 2",
            "all methods improve as epsilon grows",
        ],
    },
    # Alparslan et al. Table 1 (prediction MSE at eps = 1, mean of 50 runs), via shared/data/uci/README.md
    "alparslan-uci": {
        (1, "PowerPlant"): {"mcmc-normalx": 0.0129, "mcmc-fixeds": 0.0129, "bayes-fixeds-fast": 0.0129,
                            "mcmc-bs": 0.0128, "adassp": 0.0139},
        (1, "BikeSharing"): {"mcmc-normalx": 0.0024, "mcmc-fixeds": 0.0021, "bayes-fixeds-fast": 0.0021,
                             "mcmc-bs": 0.0020, "adassp": 0.0107},
        (1, "AirQuality"): {"mcmc-normalx": 0.0060, "mcmc-fixeds": 0.0057, "bayes-fixeds-fast": 0.0057,
                            "mcmc-bs": 0.0062, "adassp": 0.0066},
        (5, "PowerPlant"): {"mcmc-normalx": 0.0133, "mcmc-fixeds": 0.0134, "bayes-fixeds-fast": 0.0134,
                            "mcmc-bs": 0.0136, "adassp": 0.0235},
        (5, "BikeSharing"): {"mcmc-normalx": 0.0174, "mcmc-fixeds": 0.0045, "bayes-fixeds-fast": 0.0045,
                             "mcmc-bs": 0.0086, "adassp": 0.0382},
        (5, "AirQuality"): {"mcmc-normalx": 0.0142, "mcmc-fixeds": 0.0100, "bayes-fixeds-fast": 0.0099,
                            "mcmc-bs": 0.0130, "adassp": 0.0227},
        (10, "PowerPlant"): {"mcmc-normalx": 0.0142, "mcmc-fixeds": 0.0143, "bayes-fixeds-fast": 0.0143,
                             "mcmc-bs": 0.0143, "adassp": 0.0351},
        (10, "BikeSharing"): {"mcmc-normalx": 0.0812, "mcmc-fixeds": 0.0082, "bayes-fixeds-fast": 0.0082,
                              "mcmc-bs": 0.0137, "adassp": 0.0526},
        (10, "AirQuality"): {"mcmc-normalx": 0.0985, "mcmc-fixeds": 0.0117, "bayes-fixeds-fast": 0.0117,
                             "mcmc-bs": 0.0216, "adassp": 0.0314},
    },
    # Xiong, Ju & Zhang, App. E.2 Tables 2-4: posterior mean (95% interval) of beta_0, beta_1, beta_2
    "xiong-linreg": {
        10.0: {"smc-abc": [(-0.59, -2.28, 0.93), (-2.44, -3.67, -0.38), (0.85, -0.88, 2.77)],
               "sppe": [(-0.51, -2.25, 1.07), (-2.40, -3.61, -0.30), (0.90, -0.89, 2.85)],
               "sple": [(-0.64, -2.31, 0.96), (-2.61, -3.65, -0.98), (0.64, -0.93, 2.48)],
               "da-mcmc": [(-0.62, -2.50, 0.99), (-2.72, -3.74, -0.96), (0.54, -1.06, 2.46)]},
        1.0: {"smc-abc": [(-0.80, -2.74, 1.17), (-0.83, -2.64, 1.23), (0.90, -1.00, 2.58)],
              "sppe": [(-0.93, -2.80, 1.04), (-0.90, -2.62, 0.97), (1.11, -0.71, 2.72)],
              "sple": [(-0.89, -2.69, 1.06), (-1.04, -2.82, 0.91), (1.25, -0.55, 2.88)],
              "da-mcmc": [(-1.00, -2.75, 0.85), (-0.96, -2.66, 0.89), (1.23, -0.76, 2.88)]},
        0.1: {"smc-abc": [(-0.09, -1.97, 1.93), (-0.10, -2.09, 1.95), (0.11, -1.90, 2.22)],
              "sppe": [(-0.12, -2.13, 1.73), (-0.12, -2.11, 1.83), (0.14, -1.81, 2.09)],
              "sple": [(-0.04, -2.01, 1.99), (-0.06, -2.00, 1.85), (0.12, -1.86, 2.09)],
              "da-mcmc": [(-0.12, -1.98, 1.77), (-0.13, -2.13, 1.88), (0.13, -1.91, 2.12)]},
    },
    # Xiong et al. Sec. 4.1 / Fig. 1 and App. Table 1 (SIR, eps = 10, N = 1000 simulations per round)
    "xiong-sir": {
        "truth": {"log_beta": -0.5, "log_gamma": -3.0},
        "claims": [
            "after round 1 SPPE finds the high-probability region; after 5 rounds SPPE and SPLE concentrate "
            "around the posterior mean and capture the beta-gamma correlation",
            "to reach MMD < 0.1 against SMC-ABC: SPPE needs 2.12 +- 0.71 thousand simulations (18.4 min), "
            "SPLE 5.40 +- 0.77 thousand (53.1 min), SMC-ABC 82.85 +- 1.03 thousand (115.4 min)",
        ],
    },
}


# =============================================================================== framework

@dataclass
class Context:
    full: bool
    out: Path
    scheduler: str
    quiet: bool
    seed: int = 20240601

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)


@dataclass
class Result:
    figure: Any                     # a matplotlib Figure
    header: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)


@dataclass
class Entry:
    name: str
    paper: str
    what: str
    default_time: str
    full_time: str
    run: Callable[[Context], Result]
    #: modules the entry runs (engines, families): checked before any work (``gallery._require``)
    needs: tuple[str, ...] = ()


def _run_cells(ctx: Context, fn, units: list, name: str, description: str) -> list:
    """Checkpointed, resumable map of ``fn`` over ``units`` (the checkpoint is removed on success)."""
    from ..checkpoint import run_units

    scale = "full" if ctx.full else "default"
    ck = ctx.out / f"checkpoint-{scale}.json"
    fingerprint = {"gallery": name, "scale": scale, "seed": ctx.seed, "units": len(units)}
    try:
        # an automatic resume: a unit that fails verification is recomputed (and named), not refused
        results = run_units(fn, units, scheduler=ctx.scheduler, checkpoint=ck, resume=True, repair=True,
                            fingerprint=fingerprint, quiet=ctx.quiet, description=description)
    except InputError as exc:
        if exc.field != "resume":
            raise
        ck.unlink(missing_ok=True)  # a stale checkpoint of another version of this entry: start afresh
        results = run_units(fn, units, scheduler=ctx.scheduler, checkpoint=ck, resume=False,
                            fingerprint=fingerprint, quiet=ctx.quiet, description=description)
    ck.unlink(missing_ok=True)
    return results


def _seeds(ctx: Context, n: int):
    from ..execution import spawn_seeds

    return spawn_seeds(ctx.seed, n)


def _hdi(x, prob: float = 0.95) -> tuple[float, float]:
    """The ``prob`` highest-density interval of the draws (``dpposterior.convergence``: ArviZ 0.23's
    ``az.hdi`` to the last bit, whichever ArviZ is installed)."""
    from ..convergence import hdi

    return hdi(np.asarray(x, dtype=float).reshape(-1), prob)


def _g(x, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


def _markdown(header, rows) -> str:
    lines = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt
