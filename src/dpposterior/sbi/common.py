"""Shared plumbing of the simulation-based engines (SMC-ABC, SPPE, SPLE, naive NPE).

Builds the family's :class:`~dpposterior.sbi.SimulatorModel` (family hook
``sbi_model(release, prior)``), validates the engine options (``simulations``,
``rounds``, ``rqmc_points``, ...), shows a progress bar per round, and packs
draws of the unconstrained parameter into a :class:`~dpposterior.posterior.Posterior`.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np

from ..errors import InputError
from ..posterior import Posterior

def int_option(extra: dict, key: str, default: int, minimum: int = 1, maximum: int | None = None) -> int:
    value = extra.get(key, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(key, f"must be an integer >= {minimum} (got {value!r})")
    if maximum is not None and value > maximum:
        raise InputError(key, f"must be <= {maximum} (got {value!r})")
    return int(value)


def bool_option(extra: dict, key: str, default: bool) -> bool:
    value = extra.get(key, default)
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(key, f"must be true or false (got {value!r})")
    return bool(value)


def float_option(extra: dict, key: str, default: float, low: float, high: float) -> float:
    value = extra.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not (low < float(value) < high):
        raise InputError(key, f"must be a number in ({low:g}, {high:g}) (got {value!r})")
    return float(value)


def choice_option(extra: dict, key: str, default: str, choices: tuple) -> str:
    value = extra.get(key, default)
    if value is None:
        value = default
    if not isinstance(value, str) or value.lower() not in choices:
        raise InputError(key, f"must be one of {', '.join(choices)} (got {value!r})")
    return value.lower()


def device_option(extra: dict) -> str:
    """``device``: cpu (default), cuda or auto (CUDA when torch sees one); refused if cuda is absent."""
    from .flows import resolve_device

    value = choice_option(extra, "device", "cpu", ("cpu", "cuda", "auto"))
    return str(resolve_device(value))


def model_for(release, prior):
    from ..families import get_family

    family = get_family(release.family, field="release.family")
    hook = family.hooks.get("sbi_model")
    if hook is None:
        raise InputError("method", f"family {family.name!r} has no simulator model")
    return family, hook(release, prior)


def check_unused(extra: dict, used: set, method: str) -> None:
    for key in sorted(set(extra) - used):
        if extra[key] is not None:
            raise InputError(key, f"not an option of method {method!r}")


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
                 extras: dict, sample_stats: dict | None = None) -> Posterior:
    """Pack (chains*draws, d) unconstrained draws into named variables of shape (chain, draw, ...)."""
    theta = np.asarray(theta, float)
    n = (len(theta) // chains) * chains
    theta = theta[:n]
    variables, dims, coords = model.posterior_variables(theta)
    posterior = {k: np.asarray(v).reshape(chains, n // chains, *np.asarray(v).shape[1:]) for k, v in variables.items()}
    extras = dict(extras)
    extras.setdefault("theta", theta)
    extras.setdefault("model", model)
    return Posterior(family=family_name, method=method, posterior=posterior, dims=dims, coords=coords,
                     attrs=attrs, extras=extras, sample_stats=sample_stats or {},
                     iid=True)  # draws of a trained flow or of weighted ABC particles, not a Markov chain


class Stopwatch:
    def __init__(self):
        self.t0 = time.perf_counter()

    def lap(self) -> float:
        t = time.perf_counter()
        dt = t - self.t0
        self.t0 = t
        return dt
