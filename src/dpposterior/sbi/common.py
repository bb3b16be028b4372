"""Shared plumbing of the simulation-based engines (SMC-ABC, SPPE, SPLE, naive NPE).

Builds the family's :class:`~dpposterior.sbi.SimulatorModel` (family hook
``sbi_model(release, prior)``), declares the options the flow engines share
(:class:`SimulationOptions`, :class:`RQMCOptions`), shows a progress bar per round, and packs
draws of the unconstrained parameter into a :class:`~dpposterior.posterior.Posterior`.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

import numpy as np

from ..options import EngineOptions, option
from ..posterior import Posterior


@dataclass(frozen=True)
class SimulationOptions(EngineOptions):
    """Options shared by the flow engines (SPPE, SPLE, naive NPE): draws, chains, seed (draws from the
    trained flow are independent); ``simulations`` per round and ``rounds``."""

    simulations: int = option(1000, "int", "simulations per round", low=20)
    rounds: int = option(10, "int", "training rounds", low=1)


@dataclass(frozen=True)
class RQMCOptions(SimulationOptions):
    """:class:`SimulationOptions` of the engines that average the mechanism over RQMC replicates (SPPE,
    SPLE; Xiong, Ju & Zhang Sec. 3): ``rqmc_points``, ``rqmc`` and the torch ``device``."""

    rqmc_points: int = option(8, "int", "RQMC replicates of the noise per simulation", low=1, high=4096)
    rqmc: bool = option(True, "bool", "randomised quasi-Monte Carlo (false: i.i.d. uniforms)")
    device: str = option("cpu", "choice", "torch device: cpu, cuda or auto (CUDA when torch sees one)",
                         choices=("cpu", "cuda", "auto"))

    def resolved_device(self) -> str:
        """The torch device; ``cuda`` is refused where torch sees none."""
        from .flows import resolve_device

        return str(resolve_device(self.device))


#: prior draws simulated to time one simulation (after one warm-up call that compiles the simulator)
PILOT_SIMULATIONS = 20


def announce_budget(model, method: str, total: int, quiet: bool, trains: bool = True) -> None:
    """Before a run, unless quiet, on stderr: how many simulations it makes and, timed on a pilot of
    :data:`PILOT_SIMULATIONS` prior draws, about how long they take (training and sampling come on top).
    Called once the options are validated; a long run (SMC-ABC with 20,000 SIR simulations) is otherwise
    minutes of silence in a log, where progress bars are not drawn."""
    import sys

    if quiet:
        return
    rng = np.random.default_rng(0)
    simulate = model.simulate or (lambda th, r: model.statistic(model.simulator(th, r)))
    simulate(model.prior.sample(1, rng), rng)
    start = time.perf_counter()
    simulate(model.prior.sample(PILOT_SIMULATIONS, rng), rng)
    seconds = (time.perf_counter() - start) / PILOT_SIMULATIONS * total
    took = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
    print(f"{method}: {total:,} simulations of the {model.name} model, about {took} of simulation on one core"
          + (", plus training the flows" if trains else "") + " (timed on a pilot; --quiet hides this)",
          file=sys.stderr)


@contextlib.contextmanager
def round_progress(total: int, description: str, quiet: bool):
    """A rich progress bar on stderr advanced once per round: on a terminal only (docs/cli.md), so a
    redirected log gets no bar drawings; none when quiet."""
    import sys

    if quiet or not sys.stderr.isatty():
        yield lambda **kw: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[info]}"), transient=False, console=Console(stderr=True)) as progress:
        task = progress.add_task(description, total=total, info="")

        def advance(info: str = "", **kw):
            progress.update(task, advance=1, info=info)

        yield advance


def to_posterior(family_name: str, method: str, model, theta: np.ndarray, chains: int, attrs: dict,
                 extras: dict, sample_stats: dict | None = None, observation=None) -> Posterior:
    """Pack (chains*draws, d) unconstrained draws into named variables of shape (chain, draw, ...): mapped by the
    model's ``posterior_variables``, then dimensioned and labelled by its observation model's ``pack``
    (``observation``, the one the engine was given; else the simulator model's view,
    :meth:`SimulatorModel.observation_model <dpposterior.sbi.model.SimulatorModel.observation_model>`)."""
    theta = np.asarray(theta, float)
    n = (len(theta) // chains) * chains
    theta = theta[:n]
    variables, _, _ = model.posterior_variables(theta)
    posterior = {k: np.asarray(v).reshape(chains, n // chains, *np.asarray(v).shape[1:]) for k, v in variables.items()}
    extras = dict(extras)
    extras.setdefault("theta", theta)
    extras.setdefault("model", model)
    # draws of a trained flow or of weighted ABC particles, not a Markov chain
    view = observation if observation is not None else model.observation_model(family_name)
    return view.pack(posterior, method, sample_stats=sample_stats or {}, attrs=attrs, iid=True, extras=extras)


class Stopwatch:
    def __init__(self):
        self.t0 = time.perf_counter()

    def lap(self) -> float:
        t = time.perf_counter()
        dt = t - self.t0
        self.t0 = t
        return dt
