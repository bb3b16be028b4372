"""Engine ``exact-da`` for family ``small-area``: exact data augmentation over the latent counts.

Model (families/small_area.py, docs/small-area.md): y_gc ~ Poisson(E_g lambda_gc), log lambda_gc = alpha_c
+ u_g (+ v_parent(g)), u ~ N(0, tau^2), v ~ N(0, tau_parent^2), released y*_gc = y_gc + e_gc (optionally
max(0, .)), optionally with exact area totals.  A Gibbs sampler over (y, u, alpha, v, tau, tau_parent):

* **latent counts**, each exactly from its full conditional Poisson(y; mu) eta(y* - y), by enumeration
  over the window |y - y*| <= W holding all but ``tail_mass`` of the noise (intersected with the
  Poisson's own 1 - 1e-12 window where that is narrower); a released 0 under ``nonnegative``
  post-processing has likelihood P(e <= -y) (a table of the noise CDF).  With area totals the cells
  move in pairs (c, c+1 mod C) keeping each total: the split s of m = y_c + y_c' is drawn exactly from
  Binomial(s; m, mu_c / (mu_c + mu_c')) eta(y*_c - s) eta(y*_c' - m + s);
* **area effects u_g, parent effects v_p, cell effects alpha_c, log tau, log tau_parent**: one
  univariate slice-sampling step each (Neal 2003, stepping out and shrinkage), on their exact full
  conditionals through sufficient statistics (counts and exposure-weighted sums) -- no tuning, valid
  for any data; plus moves that fix the slow directions of a centred hierarchy: a joint shift
  (alpha + d, u - d) (and (v + d, u_children - d)) by random-walk Metropolis on the priors (the
  likelihood is unchanged), and a non-centred Metropolis update of tau with u / tau held fixed
  (interweaving, Yu & Meng 2011; its step adapted during warm-up only), so tau mixes when the areas
  carry little information;
* **binomial counts** (``likelihood = "binomial"``): u_g and v_p by slice steps over their cells; alpha_c by
  a Newton proposal (Metropolis-Hastings); without area totals the alpha_c and non-centred tau moves read
  the likelihood with the latent counts summed out per cell (partial collapse: the next sweep draws y
  afresh), so they need not wait on y where the noise leaves it loose (docs/small-area.md, "Binomial").

An iteration runs in four phases (small_area_kernels.py): the areas' sweep, the shared parameters from
per-unit sums, the non-centred proposal's log-likelihood change per unit, its decision and the shifts.
Sums are made per unit (a parent's areas, or a block of BLOCK areas) and added in unit order, and every
random number is splitmix64 of (chain key, area or parameter index, iteration, slot), so the draws are
the same for any thread schedule and for any partitioning of the areas into runs of units -- the Dask
path (``--scheduler local`` or ``tcp://``: small_area_dask.py) gives the serial draws bit for bit.
Kernels are numba (``cache=True``); chains run in parallel (``prange``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import RefusedError
from ..options import MCMCOptions, option
from ..posterior import Posterior
from ..mechanisms.base import NoiseShape
from .small_area_kernels import (BLOCK, GAUSS, HYP, LAPLACE, LGAMMA_TABLE, TABLE, Noise, Plan, Prior, Sampler, Shared,
                                 Table, Units, noise_steps, run_serial)

#: the most draws x areas x cells for which the ``rate`` array is stored (beyond it: alpha, u, v only)
MAX_RATE_VALUES = 40_000_000
#: per-area variables written to files as float32 (Posterior.float32_variables; docs/cli.md, "infer --out")
FLOAT32_VARIABLES = ("u", "rate")


@dataclass(frozen=True)
class SmallAreaOptions(MCMCOptions):
    """Options of ``exact-da`` (and the small-area ``naive``): draws, warmup, chains, seed; ``tail_mass`` (noise
    mass outside each enumeration window, default 1e-12); ``pair_sweeps`` (pair moves per cell per iteration
    when the release has area totals, default 1); ``partitions`` (Dask schedulers: how many runs of whole
    units the areas are split into; default one per worker thread -- the draws do not depend on it);
    ``likelihood`` (``poisson``, the default, or ``binomial``: y_gc ~ Binomial(E_gc, p_gc), logit p_gc =
    alpha_c + u_g (+ v_parent(g)), with the exposure the whole number at risk)."""

    engine: ClassVar[str] = "exact-da"
    #: the counts' law is part of the model (its variables' support, its latent statistic), not of the sampler
    model_options: ClassVar[tuple[str, ...]] = ("likelihood",)

    tail_mass: float = option(1e-12, "float", "noise mass allowed outside each enumeration window", low=0.0,
                              high=1e-3, open_high=False)
    pair_sweeps: int = option(1, "int", "pair moves per cell and iteration (area totals)", low=1)
    partitions: int | None = option(None, "int", "Dask partitions of the areas (default: one per worker; "
                                    "--scheduler local or tcp:// only)", low=1,
                                    nullable=True)
    likelihood: str = option("poisson", "choice", "the counts' law given the rates: poisson (y ~ Poisson(E rate)) "
                             "or binomial (y ~ Binomial(E, rate), E whole numbers at risk)",
                             choices=("poisson", "binomial"))


# --------------------------------------------------------------------------- the engine
def _noise_arrays(release, tail):
    """kind, per-cell scale and enumeration half-width, the post-processing table of log P(e <= -y), and -- kind
    TABLE, an integer law neither Laplace- nor Gaussian-shaped -- each distinct noise's log-mass over its window."""
    distinct, inverse, mechs = release.cell_mechanisms()
    shape = mechs[0].log_mass_shape()
    kind = TABLE if shape is None else (GAUSS if shape[0] is NoiseShape.GAUSSIAN else LAPLACE)
    sigma = release.noise_sigma()
    half = np.array([m.tail_window(tail) for m in mechs], float)[inverse]
    ystar = release.released()
    zero_pp = (ystar == 0) & (release.postprocessing == "nonnegative")
    width = int(np.ceil(half.max())) + 2
    zero_tab = np.full((len(distinct), width), -np.inf)
    if zero_pp.any():
        yy = np.arange(width, dtype=float)
        for i, m in enumerate(mechs):
            if hasattr(m, "cdf"):
                with np.errstate(divide="ignore"):
                    zero_tab[i] = np.log(np.clip(m.cdf(-yy), 0.0, 1.0))
            else:  # continuous: P(e <= -y)
                from scipy import stats

                dist = stats.norm if kind == GAUSS else stats.laplace
                zero_tab[i] = dist.logcdf(-yy, scale=m.noise_scale)
    tables = None
    if kind == TABLE:  # log-mass at d = -W..W (column d + W), W the widest window
        w = int(np.ceil(half.max()))
        d = np.arange(-w, w + 1, dtype=float)
        tables = np.stack([np.asarray(m.logpmf(d), float) for m in mechs])
    return kind, sigma, half, zero_pp, zero_tab, inverse.astype(np.int64), ystar, tables


def _plan(release, prior, opts: SmallAreaOptions, noise, totals, binom: bool) -> Plan:
    kind, scale, half, zero_pp, zero_tab, zrow, ystar, tables = noise
    G, C = release.G, release.C
    E = release.exposures()
    if binom:
        _check_sizes(release, E, totals)
    pidx, parent_ids = release.parent_index()
    P = len(parent_ids)
    if P:
        order = np.lexsort((np.arange(G), pidx))
        n_unit = np.bincount(pidx, minlength=P).astype(np.int64)
        uparent = np.arange(P, dtype=np.int64)
    else:
        order = np.arange(G)
        n_unit = np.diff(np.r_[np.arange(0, G, BLOCK), G]).astype(np.int64)
        uparent = np.zeros(n_unit.size, dtype=np.int64)
    ustart = np.r_[0, np.cumsum(n_unit)].astype(np.int64)
    ss = opts.seed if isinstance(opts.seed, np.random.SeedSequence) else np.random.SeedSequence(opts.seed)
    keys = ss.generate_state(opts.chains, dtype=np.uint64)
    rng = np.random.default_rng(ss.spawn(1)[0])
    ymax = int(max(ystar.max() + half.max(), 0)) + 64
    if totals is not None:
        ymax = max(ymax, int(totals.max()) + 2)
    if binom:
        ymax = max(ymax, int(E.max()) + 2)
    y0 = _initial_counts(ystar, totals, E if binom else None)
    alpha0, u0 = _data_start(y0, E, opts.chains, rng, binom)
    v0 = np.zeros((opts.chains, max(P, 1)))
    if P:
        v0[:] = rng.normal(0, 0.1, size=(opts.chains, P))
    hyp = np.zeros(opts.chains, HYP)
    hyp["log_tau"] = np.log(rng.uniform(0.2, 1.0, size=opts.chains))
    hyp["log_taup"] = np.log(rng.uniform(0.2, 1.0, size=opts.chains))
    hyp["log_nc_step"] = math.log(0.3)
    hyp["scale"] = 1.0

    def inner(a):
        return np.ascontiguousarray(a[order])

    row_scale = np.ones(zero_tab.shape[0])
    row_scale[zrow.ravel()] = np.asarray(scale, float).ravel()  # the cells of a row share its noise scale

    return Plan(
        run=Sampler(keys=keys, binom=binom, has_totals=totals is not None, pair_sweeps=opts.pair_sweeps,
                    warmup=opts.warmup, draws=opts.draws),
        table=Table(ystar=inner(ystar), E=inner(E), scale=inner(scale), half=inner(half), zero_pp=inner(zero_pp),
                    zrow=inner(zrow), akey=order.astype(np.int64)),
        noise=Noise(kind=kind, zero_tab=zero_tab, lgam=_lgamma_table(ymax),
                    gtab=tables if kind == TABLE else noise_steps(kind, row_scale, float(half.max()))),
        units=Units(ubase=0, ustart=ustart, uparent=uparent, n_unit=n_unit, has_p=P > 0),
        prior=Prior(float(prior.alpha_mean), float(prior.alpha_sd), float(prior.tau_scale),
                    float(prior.tau_parent_scale)),
        shared=Shared(alpha=alpha0, v=v0, dp=np.zeros_like(v0), hyp=hyp, alpha_prop=np.zeros((opts.chains, C))),
        y=np.ascontiguousarray(np.repeat(y0[order][None], opts.chains, axis=0)),
        u=np.ascontiguousarray(u0[:, order]))


def _lgamma_table(ymax: int) -> np.ndarray:
    from scipy.special import gammaln

    return gammaln(np.arange(min(ymax, LGAMMA_TABLE) + 1, dtype=float) + 1.0)


def _data_start(y, E, chains, rng, binom=False):
    """Starts near the data, dispersed: alpha_c the log rate (binomial: log odds) of cell c over all areas, u_g
    the log ratio of area g's count to what alpha predicts (so the chains need not climb from 0 to large area
    effects)."""
    if binom:
        rate = np.clip(np.maximum(y.sum(0), 0.5) / E.sum(0), 1e-6, 1 - 1e-6)
        alpha = np.log(rate / (1 - rate))
    else:
        alpha = np.log(np.maximum(y.sum(0), 0.5) / E.sum(0))
    u = np.log(np.maximum(y.sum(1), 0.5) / (E * np.exp(alpha)).sum(1))
    u = np.clip(u - u.mean(), -3.0, 3.0)
    return (alpha[None, :] + rng.normal(0, 0.3, size=(chains, alpha.size)),
            u[None, :] + rng.normal(0, 0.1, size=(chains, u.size)))


def _initial_counts(ystar, totals, sizes=None):
    """The released table rounded into the support: 0 <= y (<= N for a binomial), summing to the totals."""
    y = np.maximum(np.round(ystar), 0).astype(np.int64)
    if sizes is not None:
        y = np.minimum(y, sizes.astype(np.int64))
    if totals is None:
        return y
    for g in range(y.shape[0]):  # adjust to the exact total: add to / take from the largest cells
        diff = int(totals[g] - y[g].sum())
        while diff != 0:
            if diff < 0:
                c = int(np.argmax(y[g]))
                step = max(-y[g, c], diff)
            else:
                room = (sizes[g].astype(np.int64) - y[g]) if sizes is not None else np.full(y.shape[1], diff)
                c = int(np.argmax(room)) if sizes is not None else int(np.argmin(y[g]))
                step = min(diff, int(room[c]))
            y[g, c] += step
            diff -= step
    return y


def _check_sizes(release, E, totals) -> None:
    """The binomial's sizes: whole numbers at risk, able to hold the exact totals."""
    if release.exposure is None:
        raise RefusedError("likelihood", "binomial needs the release's exposure: the whole number at risk per area "
                                         "(or per area and cell)")
    if np.any(E != np.round(E)):
        raise RefusedError("likelihood", "binomial needs whole-number exposures (the number at risk); this "
                                         "release's are not")
    if totals is not None and np.any(totals > E.sum(axis=1)):
        g = int(np.flatnonzero(totals > E.sum(axis=1))[0])
        raise RefusedError("likelihood", f"binomial: area {release.areas[g]!r} has total {int(totals[g])} above "
                                         f"its {int(E[g].sum())} at risk")


def memory_estimate(release, opts: SmallAreaOptions, tail: float | None) -> tuple[float, float, float, float]:
    """(total, stored draws, enumeration windows, per draw and chain) in bytes for ``opts.draws`` x
    ``opts.chains`` of this release (``tail``: the window's noise mass; None: no window, as for ``naive``).

    Stored: alpha (C), u (G), v (P), tau, tau_parent per draw (measured peak: 1.16 copies),
    and the rate (G x C per draw, 2.1 copies at its measured peak) when it is kept (``MAX_RATE_VALUES``).  Windows:
    per distinct noise scale the step and post-processing tables, and per chain its work buffers (1.5
    half-widths), over the largest half-width the noise needs."""
    G, C = release.G, release.C
    P = len(set(release.parents)) if release.parents is not None else 0
    per_draw = 1.25 * 8.0 * (G + P + C + 2)
    if opts.chains * opts.draws * G * C <= MAX_RATE_VALUES:
        per_draw += 2.2 * 8.0 * G * C
    stored = opts.chains * opts.draws * per_draw
    base = 16.0 * 2 ** 20 + 8.0 * G * C * (12 + 2 * opts.chains)  # log-gamma table, release tables, latent counts
    window = 0.0
    if tail is not None:
        distinct, _, mechs = release.cell_mechanisms()
        mech = mechs[-1]  # the widest noise
        half = float(mech.tail_window(tail))
        window = 8.0 * (half + 70.0) * (2.0 * distinct.size + 2.0 + 1.5 * opts.chains)
    return stored + window + base, stored, window, per_draw


def _check_memory(release, opts: SmallAreaOptions, tail: float | None, method: str) -> None:
    """Refuse, before any allocation, a run whose draws or windows would not fit in the memory available."""
    from ..memory import available_bytes, check_fits, size

    total, stored, window, per_draw = memory_estimate(release, opts, tail)
    avail = available_bytes()
    if avail is None or total <= avail:
        return
    what = (f"{method}: {opts.draws} draws x {opts.chains} chains of {release.G} areas x {release.C} cells "
            f"(draws {size(stored)}, enumeration windows {size(window)})")
    room = avail - (total - stored)
    fit = int(room // (opts.chains * per_draw)) if room > 0 else 0
    if window > stored:
        advice = ("the noise is too wide to enumerate the latent counts here: a larger tail_mass (at most 1e-3) "
                  "narrows the window a little; a release with less noise, or a machine with more memory, is needed")
    elif fit >= 1:
        advice = f"at most {fit} draws per chain fit (--draws {fit}), or fewer chains"
    else:
        advice = "fewer chains, or a machine with more memory"
    check_fits(total, "draws", what, advice)


def exact_da(model, options) -> Posterior:
    """Engine ``exact-da`` (small-area): the Gibbs sampler of the module docstring.  Reads the model's release (the
    sampler is compiled over its G x C table, noise laws, exposures, parents and area totals) and its parsed prior
    (``model.prior.spec``), and names its draws through the model, built with the run's ``likelihood``."""
    opts = options
    release = model.release
    actors = _actors(opts)
    _check_memory(release, opts, opts.tail_mass, "exact-da")
    totals = release.area_totals()
    return _sample(model, opts, _noise_arrays(release, opts.tail_mass), totals, "exact-da",
                   {"algorithm": "exact data augmentation over the latent counts + slice/interweaving",
                    "tail_mass": opts.tail_mass, "mechanism": release.statistics.counts.mechanism,
                    "postprocessing": release.postprocessing, "invariants": int(totals is not None)},
                   actors)


def naive(model, options) -> Posterior:
    """Engine ``naive``: the noisy counts taken as true (negatives set to 0), the same model and sampler --
    the latent counts are held at the clean table (a zero-width window).  Reads what ``exact-da`` reads."""
    opts = options
    release = model.release
    actors = _actors(opts)
    _check_memory(release, opts, None, "naive")
    G, C = release.G, release.C
    clean = np.maximum(np.round(release.released()), 0)
    if model.latent.state.likelihood == "binomial":  # (taken as true, a count cannot exceed the number at risk)
        clean = np.minimum(clean, release.exposures())
    noise = (GAUSS, np.full((G, C), 1e-3), np.zeros((G, C)), np.zeros((G, C), dtype=bool), np.full((1, 2), -np.inf),
             np.zeros((G, C), dtype=np.int64), clean, None)
    return _sample(model, opts, noise, None, "naive",
                   {"algorithm": "noise-ignoring", "naive_statistic": "noisy counts taken as the true counts, "
                                                                      "negatives set to 0"}, actors)


def _actors(opts: SmallAreaOptions):
    """The current executor when it runs the partitions as Dask actors, None when the chains run in this process;
    the refusals of the executor and of ``partitions``, before any work.  Outside ``dpposterior.infer`` (no
    executor) the chains run in this process."""
    from ..execution import current_executor

    ex = current_executor()
    if ex is None or ex.in_process:
        if opts.partitions is not None:
            raise RefusedError("partitions", "is an option of the Dask schedulers (--scheduler local or "
                                             "tcp://HOST:PORT); this run is serial")
        return None
    if not ex.runs_actors:
        raise RefusedError("scheduler", "small-area keeps each partition's areas in one worker across "
                                        "iterations: use --scheduler local or tcp://HOST:PORT (Dask), or serial")
    return ex


def _sample(model, opts: SmallAreaOptions, noise, totals, method: str, attrs: dict, actors=None) -> Posterior:
    """The plan, then the compiled chains in this process (:func:`_run_chains`) or, given an executor that runs
    actors (:func:`_actors`), on Dask partitions; the draws named through ``model``."""
    from .. import progress

    release = model.release
    # the counts' law is the model's (built with the run's ``likelihood``): the draws are sampled under the law
    # they are named under
    likelihood = model.latent.state.likelihood
    plan = _plan(release, model.prior.spec, opts, noise, totals, likelihood == "binomial")
    if actors is None:
        from . import small_area_kernels

        progress.compile_notice("the small-area samplers", 20, small_area_kernels._run_chains)
        progress.status(f"{method}: {opts.chains} chains x {opts.warmup + opts.draws} iterations, {release.G} areas")
        out = run_serial(plan)
    else:
        from .small_area_dask import run_dask

        out = run_dask(plan, opts.partitions, actors)
        attrs = {**attrs, "partitions": out.pop("partitions"), "partitions_rebuilt": out.pop("partitions_rebuilt")}
    attrs = {**attrs, "likelihood": likelihood}
    return _posterior(model, method, out["alpha"], out["u"], out["v"], out["tau"], out["taup"],
                      model.latent.state.parent_index, attrs,
                      binom=plan.run.binom)


def _posterior(model, method, alpha, u, v, tau, taup, pidx, attrs, iid=False, binom=False) -> Posterior:
    """The draws named through the observation model's pack (on its marginal without ``rate`` where the rate
    table is too large to keep)."""
    post = {"alpha": alpha, "tau": tau, "u": u}
    parents = any(variable.name == "v" for variable in model.variables)
    if parents:
        post["tau_parent"] = taup
        post["v"] = v
    n_rate = alpha.shape[0] * alpha.shape[1] * u.shape[2] * alpha.shape[2]
    if n_rate <= MAX_RATE_VALUES:  # (sized first: at 10^6 cells the array alone would be 16 GB)
        log_rate = alpha[:, :, None, :] + u[:, :, :, None]
        if parents:
            log_rate = log_rate + v[:, :, pidx][:, :, :, None]
        # the rate per unit of exposure; binomial: the probability, logistic of the log odds
        post["rate"] = 1.0 / (1.0 + np.exp(-log_rate)) if binom else np.exp(log_rate)
    else:
        link = "logistic" if binom else "exp"
        attrs = {**attrs, "rate_omitted": f"rate = {link}(alpha[cell] + u[area] (+ v[parent])), not stored: "
                                          f"{n_rate} values exceed {MAX_RATE_VALUES}"}
        model = model.marginal(post)
    # per-area variables (G x draws values, 1.6 GB at 50,000 areas x 4,000 draws) are stored as float32: their
    # posterior sd and Monte Carlo error are orders above float32's relative rounding 6e-8
    return model.pack(post, method, attrs=attrs, iid=iid, float32=FLOAT32_VARIABLES)
