"""Engine ``naive`` of the simulator families: neural posterior estimation that ignores DP.

What an analyst who ignores the privacy mechanism would do with an SBI toolbox
(Xiong, Ju & Zhang Sec. 3, the baseline their Sec. 1 argues against): train a
conditional flow q(theta | s) on simulations (theta_i, s(x_i)) of the *confidential*
statistic -- no noise anywhere in the simulator -- and condition it on the released
s_dp^o as if it were s.  It is SPPE (Algorithm 1, :func:`~dpposterior.sbi.sppe.run_sppe`)
run on ``model.without_noise()`` (:class:`~dpposterior.sbi.NoiseIgnored`: tau(u, s) = s,
so one replicate per simulation, M = 1, carries all the information).

Defaults: one round of 1,000 simulations (amortised NPE, "plain" NPE as most users run it,
and the estimator whose miscalibration ``tests/test_sbi_calibration.py`` shows);
``rounds > 1`` gives sequential NPE (APT) with proposals from q(theta | s_dp^o).
It is the family's ``naive_method``: ``dpposterior infer`` prints it beside the noise-aware
posterior and ``dpposterior report`` overlays it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from ..options import option
from .flows import FlowConfig
from . import common
from .rounds import SBIResult, check_round_memory
from .sppe import run_sppe

#: options of the engine (no rqmc_points / rqmc: there is no noise to integrate)


def run_naive_npe(model, simulations: int = 1000, rounds: int = 1, draws: int = 5000, seed: int = 0,
                  num_atoms: int = 10, config: FlowConfig | None = None, quiet: bool = True,
                  round_callback=None) -> SBIResult:
    """NPE on the noise-free statistic, conditioned on ``model.observed`` (the DP release)."""
    return run_sppe(model.without_noise(), simulations, rounds, rqmc_points=1, rqmc=False, draws=draws, seed=seed,
                    num_atoms=num_atoms, config=config, quiet=quiet, round_callback=round_callback,
                    description="naive NPE", proposal="atomic")


def release_zscore(flow, observed) -> float:
    """max_j |s_dp,j^o - mean_j| / sd_j over the first round's simulated (noise-free) statistics.

    The noisy release often lies far outside everything the simulator produces without noise
    (linreg-ju at eps = 1: hundreds of sd); the flow then extrapolates and the naive posterior
    is arbitrary (it can collapse to a point).  Recorded in the posterior's attrs.
    """
    obs = torch.as_tensor(np.asarray(observed, float), dtype=torch.float32)
    return float(((obs - flow.c_mean.cpu()) / flow.c_std.cpu()).abs().max())


@dataclass(frozen=True)
class NaiveNpeOptions(common.SimulationOptions):
    """Options of engine ``naive`` (simulator families: NPE that ignores the noise): draws, chains, seed;
    ``simulations``, ``rounds`` (default 1), ``num_atoms``, ``max_epochs``."""

    engine: ClassVar[str] = "naive"

    rounds: int = option(1, "int", "training rounds", low=1)
    num_atoms: int = option(10, "int", "atoms of the atomic loss", low=2)
    max_epochs: int = option(FlowConfig.max_epochs, "int", "most training epochs per round", low=1)


def naive(model, options):
    """Engine ``naive``: noise-ignoring NPE, 1 round x 1,000 simulations by default.  Runs the simulator model the
    observation model holds (``model.latent.state``) and names the draws through the observation model."""
    observation, model = model, model.latent.state
    quiet = options.quiet
    simulations, rounds, num_atoms = options.simulations, options.rounds, options.num_atoms
    config = FlowConfig(max_epochs=options.max_epochs)
    total = options.draws * options.chains
    check_round_memory(model, simulations, rounds, 1, "naive")
    common.announce_budget(model, "naive", simulations * rounds, quiet)
    res = run_naive_npe(model, simulations, rounds, total, options.seed, num_atoms, config, quiet)
    attrs = {"simulations_per_round": simulations, "rounds": rounds, "total_simulations": simulations * rounds,
             "noise_ignored": 1, "release_zscore_max": release_zscore(res.flow, model.observed)}
    return common.to_posterior(observation.family, "naive", model, res.theta, options.chains, attrs,
                               {"flow": res.flow, "rounds": res.rounds}, observation=observation)
