"""Family ``sir``: stochastic SIR epidemic released through the binomial trajectory mechanism.

Xiong, Ju & Zhang Sec. 4.1, Prop. 4 and App. E.1.  Parameters theta =
(log beta, log gamma) with priors log beta ~ N(log 0.4, 0.5) and
log gamma ~ N(log 0.125, 0.2) (variances).  Confidential data: the Markov jump
process of :mod:`dpposterior.sbi.sir_simulator` (K = 10^6, start (K-1, 1, 0),
at most 2,000,000 events), observed as I(t) at t = 0, 17, ..., 153.  Release:
s_i = Binomial(N, (I(t_i) + m)/(K + 2m)) / N, N = 1000, m = N L / epsilon.
Output variables ``log_beta``, ``log_gamma`` and ``R0`` = beta / gamma.

Release file::

    {"format": "dpposterior-release/1", "family": "sir", "population": 1000000,
     "initial_infected": 1, "times": [0, 17, ..., 153], "event_cap": 2000000,
     "statistics": {"infected": {"value": [10 numbers in [0, 1]], "mechanism": "binomial-trajectory",
                                 "epsilon": 10.0, "trials": 1000, "m": 1000.0}}}

Curator (:func:`curate`, ``dpposterior release DATA.csv --family sir --epsilon E``): one CSV
row per time point, columns ``time``, ``infected`` (integer I(t) in [0, K]) and ``population``
(the public K, the same on every row).  OpenDP has no binomial sampler, so the noise is drawn
by numpy (seeded with ``--seed``, else from OS entropy) and the record's ``sampler`` says so.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import Annotated

from . import SimulatedRelease
from ..errors import InputError
from ..mechanisms import BinomialTrajectory
from ..mechanisms.noise import seeded_sampler_name
from ..release import FiniteFloat, ReleaseBase, StatisticRecord, load_release
from ..sbi import GaussianPrior, SimulatorModel
from ..sbi.sir_simulator import simulate_sir
from ._curate import curator, curator_options, numeric_column
from ._simulator import sbi_family


#: the mechanism of the released trajectory (Xiong, Ju & Zhang Prop. 4)
SIR_MECHANISMS = ("binomial-trajectory",)
DEFAULT_TIMES = [float(t) for t in range(0, 154, 17)]
PRIOR_MEAN = (float(np.log(0.4)), float(np.log(0.125)))
PRIOR_VARIANCE = (0.5, 0.2)


class SIRStatistics(BaseModel):
    model_config = ConfigDict(extra="forbid")
    infected: StatisticRecord


class SIRRelease(ReleaseBase):
    family: Literal["sir"]
    population: Annotated[int, Field(strict=True, ge=2)] = 1_000_000
    initial_infected: Annotated[int, Field(strict=True, ge=1)] = 1
    times: list[FiniteFloat] = Field(default_factory=lambda: list(DEFAULT_TIMES))
    event_cap: Annotated[int, Field(strict=True, ge=1)] = 2_000_000
    #: True for values copied from a publication that are not multiples of 1/trials (Xiong et al.
    #: App. E.1.2 prints four decimals although N = 100): the grid check is skipped, the values are
    #: used as given (SMC-ABC distances, SPPE/SPLE flow conditioning).
    off_grid: Annotated[bool, Field(strict=True)] = False
    statistics: SIRStatistics

    @model_validator(mode="after")
    def _check(self):
        rec = self.statistics.infected
        times = np.asarray(self.times, float)
        if times.size < 1 or np.any(times < 0) or np.any(np.diff(times) <= 0):
            raise ValueError("times must be non-negative and strictly increasing")
        if self.initial_infected > self.population:
            raise ValueError("initial_infected must be <= population")
        if rec.mechanism not in SIR_MECHANISMS:
            raise ValueError("statistics.infected.mechanism must be 'binomial-trajectory'")
        if rec.trials is None:
            raise ValueError("statistics.infected.trials (binomial N) is required")
        value = rec.array()
        if value.shape != times.shape:
            raise ValueError(f"statistics.infected.value must have one entry per time ({times.size})")
        if np.any(value < 0) or np.any(value > 1):
            raise ValueError("statistics.infected.value must lie in [0, 1] (binomial proportions)")
        k = value * rec.trials
        if not self.off_grid and np.any(np.abs(k - np.rint(k)) > 1e-6 * rec.trials):
            raise ValueError("statistics.infected.value must be multiples of 1/trials "
                             "(set \"off_grid\": true for published values that are not)")
        m_implied = rec.trials * times.size / rec.epsilon
        if rec.m is not None and not np.isclose(rec.m, m_implied, rtol=1e-6):
            raise ValueError(f"statistics.infected: m = {rec.m:g} disagrees with epsilon = N L / m "
                             f"(N L / epsilon = {m_implied:g})")
        return self

    def mechanism(self) -> BinomialTrajectory:
        rec = self.statistics.infected
        return BinomialTrajectory(self.population, rec.trials, len(self.times), epsilon=rec.epsilon)


def parse_prior(prior, release=None):
    if prior is None:
        return GaussianPrior(PRIOR_MEAN, np.diag(PRIOR_VARIANCE))
    if isinstance(prior, GaussianPrior):
        if prior.dim != 2:
            raise InputError("prior", "must be a 2-dimensional Gaussian prior on (log beta, log gamma)")
        return prior
    if not isinstance(prior, dict):
        raise InputError("prior", "must be a table with log_beta_mean, log_beta_variance, ...")
    keys = {"log_beta_mean": PRIOR_MEAN[0], "log_beta_variance": PRIOR_VARIANCE[0],
            "log_gamma_mean": PRIOR_MEAN[1], "log_gamma_variance": PRIOR_VARIANCE[1]}
    unknown = set(prior) - set(keys) - {"kind"}
    if unknown:
        raise InputError(f"prior.{sorted(unknown)[0]}", f"unknown key (use {', '.join(keys)})")
    vals = {}
    for key, default in keys.items():
        v = prior.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            raise InputError(f"prior.{key}", "must be a finite number")
        if key.endswith("variance") and v <= 0:
            raise InputError(f"prior.{key}", "must be > 0")
        vals[key] = float(v)
    return GaussianPrior([vals["log_beta_mean"], vals["log_gamma_mean"]],
                         np.diag([vals["log_beta_variance"], vals["log_gamma_variance"]]))


def _outputs(theta):
    return ({"log_beta": theta[:, 0], "log_gamma": theta[:, 1], "R0": np.exp(theta[:, 0] - theta[:, 1])},
            {}, {})


def sbi_model(release: SIRRelease, prior) -> SimulatorModel:
    times = np.asarray(release.times, float)

    def simulate(theta, rng):
        return simulate_sir(np.exp(theta[:, 0]), np.exp(theta[:, 1]), rng, release.population,
                            release.initial_infected, times, release.event_cap).astype(float)

    return SimulatorModel(prior=prior, mechanism=release.mechanism(), observed=release.statistics.infected.array(),
                          simulate=simulate, parameter_names=["log_beta", "log_gamma"], outputs=_outputs,
                          name="sir")


def make_release(values, epsilon: float, trials: int = 1000, population: int = 1_000_000, times=None,
                 description: str | None = None, sampler: str | None = None, initial_infected: int = 1,
                 event_cap: int = 2_000_000, off_grid: bool = False) -> dict:
    times = list(DEFAULT_TIMES if times is None else times)
    rel = {"format": "dpposterior-release/1", "family": "sir", "population": population,
           "initial_infected": initial_infected, "times": times, "event_cap": event_cap,
           "statistics": {"infected": {"value": [float(v) for v in values], "mechanism": "binomial-trajectory",
                                       "epsilon": float(epsilon), "trials": int(trials),
                                       "m": trials * len(times) / float(epsilon)}}}
    if off_grid:
        rel["off_grid"] = True
    if sampler:
        rel["statistics"]["infected"]["sampler"] = sampler
    if description:
        rel["description"] = description
    return rel


# -- curator -------------------------------------------------------------------------------

TIME_COLUMN = "time"
INFECTED_COLUMN = "infected"
POPULATION_COLUMN = "population"
DEFAULT_TRIALS = 1000


def _whole(value, field: str, minimum: int) -> int:
    """An integer-valued option (int, a float/numpy number equal to an integer, or such a number
    written as a string on the command line) >= minimum."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise InputError(field, f"must be an integer >= {minimum} (got {text!r})") from None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not np.isfinite(value) or value != np.rint(value) or value < minimum:
        raise InputError(field, f"must be an integer >= {minimum} (got {value!r})")
    return int(value)


def _population(frame, extra: dict) -> int:
    """K: the public population size, from a constant ``population`` column and/or ``extra``."""
    from_option = None if extra.get("population") is None else _whole(extra["population"], "population", 2)
    if POPULATION_COLUMN in frame.columns:
        col = numeric_column(frame, POPULATION_COLUMN, POPULATION_COLUMN)
        if np.any(col != col[0]):
            row = int(np.flatnonzero(col != col[0])[0])
            raise InputError(f"data.{POPULATION_COLUMN}", f"row {row + 1}: {col[row]:g} differs from row 1 "
                             f"({col[0]:g}); K is one public number, the same on every row")
        from_column = _whole(col[0], f"data.{POPULATION_COLUMN}", 2)
        if from_option is not None and from_option != from_column:
            raise InputError("population", f"{from_option} disagrees with the data's population column "
                             f"({from_column})")
        return from_column
    if from_option is None:
        raise InputError("population", f"the public population size K is required: add a "
                         f"{POPULATION_COLUMN!r} column (the same K on every row)")
    return from_option


def parse_times(value, field: str = "times") -> list[float]:
    """The time grid: a list of numbers or a comma-separated string, finite, >= 0, strictly increasing."""
    if isinstance(value, str):
        parts = [v.strip() for v in value.split(",")]
        if not value.strip() or any(not v for v in parts):
            raise InputError(field, f"must be comma-separated numbers such as 0,1,2 (got {value!r})")
        out = []
        for v in parts:
            try:
                out.append(float(v))
            except ValueError:
                raise InputError(field, f"{v!r} is not a number") from None
    else:
        try:
            out = [float(v) for v in value]
        except (TypeError, ValueError):
            raise InputError(field, f"must be a list of numbers (got {value!r})") from None
        if any(isinstance(v, bool) for v in value):
            raise InputError(field, "must be a list of numbers, not booleans")
    arr = np.asarray(out, float)
    if arr.size < 1:
        raise InputError(field, "must list at least one time point")
    if not np.all(np.isfinite(arr)):
        raise InputError(field, "must be finite numbers")
    if np.any(arr < 0):
        raise InputError(field, f"time {arr[arr < 0][0]:g} is negative (the epidemic starts at t = 0)")
    if np.any(np.diff(arr) <= 0):
        k = int(np.flatnonzero(np.diff(arr) <= 0)[0])
        raise InputError(field, f"must be strictly increasing ({arr[k]:g} then {arr[k + 1]:g})")
    return [float(t) for t in arr]


def _times(frame, option):
    """Release times: the ``time`` column, or ``--times`` (rows in order) when the CSV has none;
    both given must agree row by row."""
    if option is None:
        return numeric_column(frame, TIME_COLUMN, "data")
    grid = np.asarray(parse_times(option), float)
    if grid.size != len(frame):
        raise InputError("times", f"{grid.size} time points for {len(frame)} data rows (one per row)")
    if TIME_COLUMN in frame.columns:
        col = numeric_column(frame, TIME_COLUMN, "data")
        if not np.array_equal(col, grid):
            row = int(np.flatnonzero(col != grid)[0])
            raise InputError("times", f"row {row + 1}: --times gives {grid[row]:g} but the data's time column "
                             f"{col[row]:g} (give one of them, or make them agree)")
    return grid


def _unseeded_sampler() -> str:
    """Name of the unseeded sampler; OpenDP has no binomial mechanism, so say why numpy is used."""
    try:
        from importlib.metadata import version

        opendp = f"OpenDP {version('opendp')} has"
    except Exception:  # pragma: no cover - opendp is a hard dependency
        opendp = "OpenDP has"
    return f"numpy-{np.__version__} (unseeded, OS entropy; {opendp} no binomial sampler)"


#: the sir curator's typed options (docs/cli.md, "Curator options")
SirCuratorOptions = curator_options("sir", "column", "mechanism", "population", "trials", "times", "initial_infected",
                                    "event_cap", module=__name__)


@curator(SirCuratorOptions, reads=lambda o: [o.column or INFECTED_COLUMN, TIME_COLUMN, POPULATION_COLUMN])
def curate(frame, options) -> dict:
    """Curator (Prop. 4): CSV rows ``time,infected[,population]`` -> a ``sir`` release.

    One row per release time point t_i with the confidential count I(t_i) (an integer in
    [0, K]).  The time grid is the ``time`` column or ``options.times`` (``--times 0,1,2``,
    one per row in row order; with both they must agree).  The population K is public: a
    ``population`` column (the same on every row) or ``options.population`` (``--population``).
    ``--column`` renames the count column (default ``infected``).  ``options.trials``
    (``--trials``) is N (default 1000).  ``extra`` may set the same three keys and
    ``initial_infected`` (1) and ``event_cap`` (2,000,000), the analyst's simulator settings.
    s_i = Binomial(N, (I(t_i) + m)/(K + 2m))/N with m = N L / epsilon: epsilon-DP in total.
    OpenDP offers no binomial sampler, so the noise always comes from numpy (seeded with
    ``--seed``, else from OS entropy); the record's ``sampler`` says which.
    """

    if options.mechanism not in (None, *SIR_MECHANISMS):
        raise InputError("mechanism", "sir trajectories are released by the binomial trajectory mechanism "
                         "only (Prop. 4): omit --mechanism")
    extra = {key: getattr(options, key) for key in ("population", "trials", "times", "initial_infected", "event_cap")
             if getattr(options, key) is not None}
    if len(frame) == 0:
        raise InputError("data", "the CSV has no rows")
    infected_column = options.column or INFECTED_COLUMN
    if infected_column in (TIME_COLUMN, POPULATION_COLUMN):
        raise InputError("column", f"{infected_column!r} is the {infected_column} column, not the infected counts")
    counts = numeric_column(frame, infected_column, "column")
    times = _times(frame, extra.get("times"))
    population = _population(frame, extra)
    trials = _whole(extra.get("trials", DEFAULT_TRIALS), "trials", 1)
    initial_infected = _whole(extra.get("initial_infected", 1), "initial_infected", 1)
    event_cap = _whole(extra.get("event_cap", 2_000_000), "event_cap", 1)
    if initial_infected > population:
        raise InputError("initial_infected", f"must be <= the population K = {population}")

    if np.any(times < 0):
        row = int(np.flatnonzero(times < 0)[0])
        raise InputError(f"data.{TIME_COLUMN}", f"row {row + 1}: time {times[row]:g} is negative "
                         "(the epidemic starts at t = 0)")
    # rows may come in any order; the release lists the time points increasingly
    order = np.argsort(times, kind="stable")
    times, counts = times[order], counts[order]
    dup = np.flatnonzero(np.diff(times) == 0)
    if dup.size:
        raise InputError(f"data.{TIME_COLUMN}", f"time {times[dup[0]]:g} appears twice "
                         "(one row per release time point)")
    not_whole = np.flatnonzero(counts != np.rint(counts))
    if not_whole.size:
        i = int(order[not_whole[0]])
        raise InputError(f"data.{infected_column}", f"row {i + 1}: {counts[not_whole[0]]:g} is not a whole "
                         "number of infected people")
    out_of_range = np.flatnonzero((counts < 0) | (counts > population))
    if out_of_range.size:
        i = int(order[out_of_range[0]])
        raise InputError(f"data.{infected_column}", f"row {i + 1}: {counts[out_of_range[0]]:g} infected is "
                         f"outside [0, K] (K = population = {population})")

    mech = BinomialTrajectory(population, trials, len(times), epsilon=float(options.epsilon))
    if options.seed is None:
        rng, sampler = np.random.default_rng(), _unseeded_sampler()
    else:
        rng, sampler = np.random.default_rng(options.seed), seeded_sampler_name(options.seed)
    noisy = mech.sample(counts, rng)
    return make_release(noisy, options.epsilon, trials=trials, population=population,
                        times=[float(t) for t in times], sampler=sampler,
                        initial_infected=initial_infected, event_cap=event_cap)


def simulate(prior, n, epsilon, rng) -> SimulatedRelease:
    """Calibration hook: ``n`` is the population K."""

    prior = parse_prior(prior)
    theta = prior.sample(1, rng)
    counts = simulate_sir(np.exp(theta[:, 0]), np.exp(theta[:, 1]), rng, population=n)[0]
    mech = BinomialTrajectory(n, 1000, len(DEFAULT_TIMES), epsilon=epsilon)
    rel = make_release(mech.sample(counts, rng), epsilon, population=n)
    return SimulatedRelease(theta={"log_beta": theta[0, 0], "log_gamma": theta[0, 1]},
                            release=load_release(rel), confidential={"infected": counts})


FAMILY = sbi_family("sir", SIRRelease, parse_prior, simulate, sbi_model,
                    "stochastic SIR epidemic, binomial trajectory mechanism (Xiong, Ju & Zhang Sec. 4.1)",
                    curate=curate, mechanisms=SIR_MECHANISMS)
