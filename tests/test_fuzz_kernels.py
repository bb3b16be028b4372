"""Property-based fuzzing of the compiled Gibbs-SS kernels (and the engines on top).

Over extreme n, epsilon (Laplace scale), released values, bounds and priors, every call
either returns finite draws in the parameter's range or refuses the input with a one-line
:class:`InputError` -- never a ZeroDivisionError, a NaN, or a kernel that never returns
(NaN shapes sent numba's gamma sampler into an endless loop before the fix).

Examples are few and chains short (20 + 20 iterations) so the whole module runs in well
under a minute; ``derandomize=True`` makes the examples a fixed function of the test, so a
run is reproducible (no hypothesis database is written).
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpposterior as dp
from dpposterior.families import get_family
from dpposterior.errors import InputError
from dpposterior.families._expfam import BetaPrior, DirichletPrior, GammaPrior
from dpposterior.inference import gibbs_ss as G

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))

released = st.one_of(st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False),
                     st.floats(-1e3, 1e3, allow_nan=False), st.sampled_from([0.0, -0.0, 1e-300, -1e-300]))
counts = st.one_of(st.integers(1, 10), st.integers(1, 10**15))
#: Laplace scale b = sensitivity / epsilon: epsilon from ~1e-12 (b = 1e12) to ~1e12 (b = 1e-12)
scales = st.floats(1e-12, 1e12, allow_nan=False)
concentrations = st.one_of(st.floats(1e-3, 1e3), st.sampled_from([1.0, 0.5]))
seeds = st.integers(0, 2**32 - 1)
SHORT = dict(warmup=20, draws=20)


def _finite(out, lo=0.0, hi=np.inf):
    theta = out["theta"]
    assert np.all(np.isfinite(theta)), theta
    assert np.all((theta >= lo) & (theta <= hi)), theta
    assert out["fallbacks"].shape == theta.shape[:2]


@FUZZ
@given(y=released, n=counts, b=scales, a=concentrations, c=concentrations, seed=seeds)
def test_binomial_kernel(y, n, b, a, c, seed):
    _finite(G.sample_batch("binomial", np.array([y, 0.3 * n]), float(n), b, BetaPrior(a, c), seed=seed, **SHORT),
            0.0, 1.0)


@FUZZ
@given(y=st.lists(released, min_size=2, max_size=4), n=counts, b=scales, a=concentrations, seed=seeds)
def test_multinomial_kernel(y, n, b, a, seed):
    out = G.sample_batch("multinomial", np.array([y]), float(n), b, DirichletPrior((a,)), seed=seed, **SHORT)
    _finite(out, 0.0, 1.0)
    np.testing.assert_allclose(out["theta"].sum(axis=-1), 1.0, rtol=1e-9)


@FUZZ
@given(family=st.sampled_from(["exponential", "poisson"]), y=released, n=counts, b=scales,
       shape=concentrations, rate=concentrations, lo=st.floats(0, 1e9), width=st.floats(1e-9, 1e9), seed=seeds)
def test_truncated_kernels(family, y, n, b, shape, rate, lo, width, seed):
    hi = lo + width
    if not hi > lo:  # lo + width rounded back to lo
        return
    out = G.sample_batch(family, np.array([y]), float(n), b, GammaPrior(shape, rate), bounds=[lo, hi], seed=seed,
                         **SHORT)
    _finite(out, G.RATE_MIN, G.RATE_MAX)


@pytest.mark.parametrize("family,kwargs,field", [
    ("binomial", dict(y=[np.nan]), "release.released"),
    ("binomial", dict(y=[np.inf]), "release.released"),
    ("binomial", dict(n=0.0), "release.n"),
    ("binomial", dict(n=np.inf), "release.n"),
    ("binomial", dict(scale=0.0), "release.scale"),
    ("binomial", dict(scale=np.nan), "release.scale"),
    ("binomial", dict(prior=BetaPrior(0.0, 1.0)), "prior"),
    ("exponential", dict(bounds=[2.0, 1.0]), "release.bounds"),
    ("poisson", dict(bounds=[-1.0, 1.0]), "release.bounds"),
    ("poisson", dict(bounds=[0.0, np.inf]), "release.bounds"),
    ("exponential", dict(prior=GammaPrior(1.0, np.inf)), "prior"),
])
def test_unusable_inputs_are_one_line_refusals(family, kwargs, field):
    args = dict(y=[3.0], n=10.0, scale=1.0, bounds=[0.0, 5.0],
                prior=BetaPrior() if family == "binomial" else GammaPrior())
    args.update(kwargs)
    with pytest.raises(InputError) as info:
        G.sample_batch(family, np.asarray(args["y"], float), args["n"], args["scale"], args["prior"],
                       bounds=args["bounds"], seed=1, **SHORT)
    assert info.value.field == field and "\n" not in str(info.value)


# ---------------------------------------------------------------- every engine, through infer()

def _release(family, value, n, eps, bounds):
    rec = {"value": value, "mechanism": "laplace", "epsilon": eps}
    if family == "binomial":
        return {"format": "dpposterior-release/1", "family": family, "n": n, "statistics": {"successes": rec}}
    return {"format": "dpposterior-release/1", "family": family, "n": n, "bounds": list(bounds),
            "statistics": {"truncated_sum": rec}}


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(family=st.sampled_from(["binomial", "exponential", "poisson"]), value=released, n=counts,
       eps=st.floats(1e-12, 1e12), lo=st.floats(0, 1e6), width=st.floats(1e-6, 1e6), seed=seeds)
def test_every_engine_finite_or_one_line_refusal(family, value, n, eps, lo, width, seed):
    """Each engine of the family on a (possibly absurd but well-formed) release: finite draws or a
    one-line InputError from the release or the engine."""
    release = _release(family, value, n, eps, (lo, lo + width))
    try:
        methods = get_family(family).methods
        rel = dp.load_release(release)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    for method in methods:
        if method in ("non-private", "ops"):  # need the confidential data: not a release engine
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                post = dp.infer(rel, method=method, chains=1, seed=seed, **SHORT)
        except InputError as exc:  # RefusedError is an InputError
            assert "\n" not in str(exc), (method, str(exc))
            continue
        for name, draws in post.posterior.items():
            assert np.all(np.isfinite(np.asarray(draws, float))), (method, name, json.dumps(release))
