"""An integer noise law written outside the package, through the public contract only (docs/adding-a-mechanism.md):
a subclass of ``dpposterior.mechanisms.IntegerNoise`` that sets ``name`` and ``record_fields`` and defines
``log_kernel``, ``log_norm``, ``tail_window`` and ``draw``, registered with ``dpposterior.mechanisms.register``.

Nothing here touches a file of the package.  The law is a truncated two-sided geometric (bounded support: not a
subclass or a rescaling of any built-in law); every posterior is checked against a reference computed here by
enumeration or on a grid, and its reported epsilon against its exact privacy profile summed from the mass function.
A second law, the two-sided geometric written from scratch, checks the tabulated paths (da-mcmc, small-area)
against the built-in discrete Laplace's own kernels (the same law through different code).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

import dpposterior as dp
from dpposterior.mechanisms import IntegerNoise, register


class TruncatedGeometric(IntegerNoise):
    """P(k) proportional to q^|k| on |k| <= width, 0 beyond."""

    name = "test-truncated-geometric"
    record_fields = ("q", "width", "sensitivity")

    def __init__(self, q, width, sensitivity=1.0):
        if not 0.0 < float(q) < 1.0:
            raise ValueError(f"q: must lie in (0, 1) (got {q})")
        if int(width) != width or width < 1:
            raise ValueError(f"width: must be a whole number >= 1 (got {width})")
        self.q, self.width, self.sensitivity = float(q), int(width), float(sensitivity)

    def log_kernel(self, k):
        k = np.abs(np.asarray(k, float))
        return np.where(k <= self.width, k * math.log(self.q), -np.inf)

    @property
    def log_norm(self):
        k = np.arange(-self.width, self.width + 1)
        return float(np.log(np.sum(self.q ** np.abs(k))))

    def tail_window(self, tail=1e-12):
        return self.width

    def draw(self, shape, rng):
        k = np.arange(-self.width, self.width + 1)
        p = self.q ** np.abs(k)
        return rng.choice(k, size=shape, p=p / p.sum()).astype(np.int64)


class PlainGeometric(IntegerNoise):
    """P(k) proportional to exp(-|k| / scale) on the integers: the discrete Laplace's law, written from scratch."""

    name = "test-plain-geometric"
    record_fields = ("b",)

    def __init__(self, b):
        self.scale = float(b)

    def log_kernel(self, k):
        return -np.abs(np.asarray(k, float)) / self.scale

    @property
    def log_norm(self):
        q = math.exp(-1.0 / self.scale)
        return math.log((1.0 + q) / (1.0 - q))

    def tail_window(self, tail=1e-12):
        return int(math.ceil(self.scale * math.log(2.0 / tail)))

    def draw(self, shape, rng):
        p = -math.expm1(-1.0 / self.scale)
        return (rng.geometric(p, size=shape) - rng.geometric(p, size=shape)).astype(np.int64)


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    from dpposterior.mechanisms import registry

    monkeypatch.setattr(registry, "MECHANISMS", dict(registry.MECHANISMS))
    register(TruncatedGeometric)
    register(PlainGeometric)
    yield


TG = {"mechanism": TruncatedGeometric.name, "q": 0.6, "width": 6}
LAW = TruncatedGeometric(0.6, 6)


def _mass(law, k):
    return np.exp(law.logpmf(np.asarray(k, float)))


def _release(family, **body):
    return {"format": "dpposterior-release/1", "family": family, **body}


def _close(draws, reference, n_sd=4.5):
    """An exact engine's iid draws: the mean within n_sd Monte Carlo standard errors of the reference."""
    draws = np.asarray(draws, float).reshape(-1, *np.shape(reference))
    se = draws.std(axis=0) / math.sqrt(draws.shape[0])
    assert np.all(np.abs(draws.mean(axis=0) - reference) <= n_sd * se + 1e-9), (draws.mean(axis=0), reference, se)


# --------------------------------------------------------------------------- the contract
def test_registration_refuses_a_law_missing_a_member_and_a_taken_name():
    class NoDraw(IntegerNoise):
        name = "test-no-draw"
        record_fields = ()

        def log_kernel(self, k):
            return -np.abs(k)

    with pytest.raises(dp.InputError, match="must define log_norm, tail_window, draw"):
        register(NoDraw)

    class Taken(PlainGeometric):
        name = TruncatedGeometric.name

    with pytest.raises(dp.InputError, match="registered already"):
        register(Taken)

    class Reserved(PlainGeometric):
        name = "test-reserved-field"
        record_fields = ("scale",)  # naive-bayes's counts/proportions in every release record

    with pytest.raises(dp.InputError, match="scale is a field of every release record"):
        register(Reserved)


def test_records_are_checked_by_the_law_itself():
    body = {"n": 30, "statistics": {"successes": {"value": 11, **TG}}}
    assert dp.load_release(_release("binomial", **body)).statistics.successes.model_extra["q"] == 0.6
    bad = {"n": 30, "statistics": {"successes": {"value": 11, **TG, "q": 1.5}}}
    with pytest.raises(dp.InputError, match=r"statistics\.successes\.q: must lie in \(0, 1\)"):
        dp.load_release(_release("binomial", **bad))
    for extra, field in (({"sigma": 2.0}, "sigma"), ({"colour": "red"}, "colour")):
        with pytest.raises(dp.InputError, match=field):
            dp.load_release(_release("binomial", n=30, statistics={"successes": {"value": 11, **TG, **extra}}))
    with pytest.raises(dp.InputError, match="integers"):
        dp.load_release(_release("binomial", n=30, statistics={"successes": {"value": 11.5, **TG}}))
    no_width = {k: v for k, v in TG.items() if k != "width"}
    with pytest.raises(dp.InputError, match="width: is required"):
        dp.load_release(_release("binomial", n=30, statistics={"successes": {"value": 11, **no_width}}))


# --------------------------------------------------------------------------- privacy from the mass function
def _exact_delta(law, epsilon, shifts: int) -> float:
    """delta(epsilon) of ``shifts`` coordinates each moved by one: the hockey-stick divergence of the product
    law, summed exactly over the support (for an unbounded law, over a window leaving < 1e-18 outside)."""
    w = law.width if hasattr(law, "width") else law.tail_window(1e-18)
    k = np.arange(-w, w + 1)  # the support of P
    p, q = _mass(law, k), _mass(law, k - 1)
    # the privacy loss log P/Q of one coordinate (infinite where Q has no mass) and its law under P; the
    # product's loss is the sum over coordinates
    loss = [math.log(pk / qk) if qk > 0 else math.inf for pk, qk in zip(p, q)]
    values = {0.0: 1.0}
    for _ in range(shifts):
        nxt: dict = {}
        for v, w in values.items():
            for lv, pv in zip(loss, p):
                nxt[v + lv] = nxt.get(v + lv, 0.0) + w * pv
        values = nxt
    return float(sum(w * (1.0 - math.exp(epsilon - v)) for v, w in values.items() if v > epsilon))


@pytest.mark.parametrize("family, body, shifts", [
    ("binomial", {"n": 30, "statistics": {"successes": {"value": 11, **TG}}}, 1),
    ("multinomial", {"n": 40, "statistics": {"counts": {"value": [9, 21, 11], **TG, "q": 0.5}}}, 2),
])
def test_reported_epsilon_is_not_below_the_exact_privacy_profile(family, body, shifts):
    release = dp.load_release(_release(family, **body, report_delta=0.02))
    law = release.mechanism
    cost = release.privacy()
    assert cost.accounting == "pld" and math.isfinite(cost.epsilon)
    # the claimed (epsilon, delta) holds: the exact delta at the reported epsilon is at most the reported delta ...
    assert _exact_delta(law, cost.epsilon, shifts) <= cost.delta * (1 + 1e-9)
    # ... and it is tight: 1% below the reported epsilon the exact delta exceeds it
    assert _exact_delta(law, 0.99 * cost.epsilon, shifts) > cost.delta


def test_bounded_support_is_not_private_below_its_edge_mass():
    """Shifted by one, the edge value k = -width has no counterpart: delta must exceed its mass."""
    edge = float(_mass(LAW, LAW.width))
    release = dp.load_release(_release("binomial", n=30, statistics={"successes": {"value": 11, **TG}},
                                       report_delta=0.5 * edge))
    assert release.privacy().epsilon == math.inf


# --------------------------------------------------------------------------- posteriors against references
def test_binomial_exact_against_a_grid():
    y, n = 11, 30
    post = dp.infer(_release("binomial", n=n, statistics={"successes": {"value": y, **TG}}), seed=1, draws=4000)
    assert post.method == "exact"
    p = np.linspace(1e-4, 1 - 1e-4, 4001)
    s = np.arange(n + 1)
    like = stats.binom.pmf(s[None], n, p[:, None]) @ _mass(LAW, y - s)
    w = like * stats.beta.pdf(p, 1, 1)  # the family's default prior: uniform
    _close(post.draws("p"), (w * p).sum() / w.sum())


def test_multinomial_exact_against_enumeration():
    y, n = np.array([4, 7, 2]), 12
    post = dp.infer(_release("multinomial", n=n, statistics={"counts": {"value": y.tolist(), **TG}}), seed=2,
                    draws=4000)
    assert post.method == "exact"
    alpha = np.ones(3)
    mean, total = np.zeros(3), 0.0
    for s0 in range(n + 1):
        for s1 in range(n + 1 - s0):
            s = np.array([s0, s1, n - s0 - s1])
            # Dirichlet-multinomial mass of s (up to n!), times the noise
            w = math.exp(special.gammaln(s + alpha).sum() - special.gammaln(s + 1).sum()) * _mass(LAW, y - s).prod()
            mean += w * (s + alpha) / (n + alpha.sum())
            total += w
    _close(post.draws("p"), mean / total)


def test_poisson_exact_against_a_grid():
    n, hi, y = 8, 4, 17
    release = _release("poisson", n=n, bounds=[0, hi], statistics={"truncated_sum": {"value": y, **TG, "sensitivity": hi}})
    post = dp.infer(release, seed=3, draws=4000)
    assert post.method == "exact"
    prior = dp.load_release(release).family_entry.parse_prior(None)
    lam = np.linspace(1e-3, 15, 3000)
    like = np.empty_like(lam)
    for i, l in enumerate(lam):
        one = stats.poisson.pmf(np.arange(hi + 1), l)
        one[0] += stats.poisson.sf(hi, l)  # a count outside the bounds adds nothing to the truncated sum
        dist = np.array([1.0])
        for _ in range(n):
            dist = np.convolve(dist, one)
        like[i] = dist @ _mass(LAW, y - np.arange(dist.size))
    w = like * stats.gamma.pdf(lam, prior.shape, scale=1.0 / prior.rate)
    _close(post.draws("rate"), (w * lam).sum() / w.sum())


def test_naive_bayes_exact_against_enumeration_of_the_tables():
    n = 6
    table = [[2, 1], [1, 2]]  # one binary feature, two classes
    release = _release("naive-bayes", n=n, classes=2, levels=[2],
                       statistics={"tables": {"value": [table], **TG, "q": 0.5, "width": 3, "scale": "counts"}})
    post = dp.infer(release, seed=4, draws=4000)
    assert post.method == "exact"
    law = TruncatedGeometric(0.5, 3)
    y = np.asarray(table, float)
    mean, total = np.zeros(2), 0.0
    for cells in itertools.product(range(n + 1), repeat=4):
        if sum(cells) != n:
            continue
        t = np.asarray(cells, float).reshape(2, 2)
        N = t.sum(axis=1)
        # uniform Dirichlet priors: class counts ~ DirMult(1, 1), each row ~ DirMult(1, 1) given its class count
        w = (math.exp(special.gammaln(N + 1).sum() - special.gammaln(N + 1).sum())  # DirMult(1,1): 1/(n+1) each
             * np.prod([1.0 / (Ni + 1) for Ni in N]) * _mass(law, y - t).prod())
        mean += w * (N + 1) / (n + 2)
        total += w
    _close(post.draws("class_prob"), mean / total)


# --------------------------------------------------------------------------- tabulated paths vs the built-in law
def test_da_mcmc_on_a_user_model_matches_a_grid_reference():
    law = TruncatedGeometric(0.8, 20, 10)
    model = dp.Model(params={"lam": stats.gamma(2.0, scale=2.0)}, n=40,
                     records=lambda th, size, rng: rng.poisson(th["lam"], size=size),
                     statistic=lambda x: np.clip(x, 0, 10), mechanism=law,
                     record_logpdf=lambda x, th: stats.poisson.logpmf(x, th["lam"]))
    y = 181
    lam = np.linspace(1.5, 9.0, 600)
    like = np.empty_like(lam)
    for i, l in enumerate(lam):
        one = stats.poisson.pmf(np.arange(11), l)
        one[10] += stats.poisson.sf(10, l)
        dist = np.array([1.0])
        for _ in range(40):
            dist = np.convolve(dist, one)
        like[i] = dist @ _mass(law, y - np.arange(dist.size))
    w = like * stats.gamma.pdf(lam, 2.0, scale=2.0)
    mean = (w * lam).sum() / w.sum()
    sd = math.sqrt((w * (lam - mean) ** 2).sum() / w.sum())
    post = dp.infer(model, observed=[y], method="da-mcmc", draws=2000, warmup=500, chains=4, seed=5)
    assert not [m for m in post.warnings if "R-hat" in m]
    ess = float(np.asarray(post.to_arviz().posterior["lam"]).size) / 10  # conservative for DA chains
    assert abs(post.draws("lam").mean() - mean) < 4.5 * sd / math.sqrt(ess)


def test_small_area_tabulated_law_agrees_with_the_builtin_kernels():
    """The two-sided geometric through the table kernel and the discrete Laplace through its recurrence: the
    same posterior (independent chains: means within Monte Carlo error from their ESS)."""
    import arviz as az

    def table(mechanism):
        return _release("small-area", areas=["a", "b", "c", "d"], cells=["x", "y"],
                        exposure=[100.0, 200.0, 150.0, 120.0],
                        statistics={"counts": {"value": [[3, 5], [7, 2], [4, 4], [0, 6]], **mechanism}})

    scale = 2.0
    mine = dp.infer(table({"mechanism": PlainGeometric.name, "b": scale}), seed=6, draws=2000, warmup=1000,
                    chains=2)
    builtin = dp.infer(table({"mechanism": "discrete-laplace", "epsilon": 2.0 / scale}), seed=7, draws=2000,
                       warmup=1000, chains=2)
    assert mine.method == builtin.method == "exact-da"
    a, b = mine.to_arviz(), builtin.to_arviz()
    for var in ("alpha", "u"):
        ma, mb = (np.asarray(x.posterior[var]).reshape(-1, *x.posterior[var].shape[2:]) for x in (a, b))
        ess_a = np.asarray(az.ess(a, var_names=[var])[var]).ravel()
        ess_b = np.asarray(az.ess(b, var_names=[var])[var]).ravel()
        se = np.sqrt(ma.var(axis=0).ravel() / ess_a + mb.var(axis=0).ravel() / ess_b)
        assert np.all(np.abs(ma.mean(axis=0).ravel() - mb.mean(axis=0).ravel()) < 4.5 * se), var
    # the table's privacy: two cells shifted by one under the law's own loss distribution (pure 2 / scale; at
    # the reported delta a hair less), never below the exact profile
    cost = dp.load_release(table({"mechanism": PlainGeometric.name, "b": scale})).privacy()
    assert cost.epsilon == pytest.approx(2.0 / scale, rel=2e-3)
    assert _exact_delta(PlainGeometric(scale), cost.epsilon, 2) <= cost.delta * (1 + 1e-6)


def test_naive_bayes_da_mcmc_under_the_law_agrees_with_exact():
    """da-mcmc's record model takes the tables' own law (its log-mass tabulated), not a Laplace stand-in."""
    release = _release("naive-bayes", n=12, classes=2, levels=[2, 2],
                       statistics={"tables": {"value": [[[3, 4], [2, 4]], [[4, 2], [3, 3]]], **TG, "q": 0.5,
                                              "scale": "counts"}})
    exact = dp.infer(release, seed=8, draws=4000)
    da = dp.infer(release, method="da-mcmc", seed=9, draws=3000, warmup=500, chains=4)
    assert not [m for m in da.warnings if "R-hat" in m]
    ref = np.asarray(exact.posterior["feature_prob"]).reshape(-1, 2, 2, 2)
    got = np.asarray(da.posterior["feature_prob"]).reshape(-1, 2, 2, 2)
    ess = got.shape[0] / 10  # conservative for data-augmentation chains
    assert np.all(np.abs(got.mean(0) - ref.mean(0)) < 4.5 * ref.std(0) / math.sqrt(ess))


def test_a_law_breaking_the_contract_is_refused_when_built():
    class Lopsided(PlainGeometric):
        name = "test-lopsided"

        def log_kernel(self, k):
            k = np.asarray(k, float)
            return np.where(k >= 0, -k / self.scale, 2.0 * k / self.scale)

    register(Lopsided)
    with pytest.raises(dp.InputError, match="symmetric in k"):
        dp.load_release(_release("binomial", n=30, statistics={"successes": {"value": 11, "mechanism": Lopsided.name,
                                                                             "b": 2.0}}))
