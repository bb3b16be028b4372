"""dpposterior.convergence against ArviZ: rank-normalised split R-hat, bulk and tail ESS, HDI
and the summary table agree with ArviZ 0.23 to 1e-10 on many shapes, seeds and kinds of chains --
including ties, constant chains, odd draw counts, one chain, and NaN (ArviZ's rule: any NaN -> NaN)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

az = pytest.importorskip("arviz")
from dpposterior.arviz_compat import arviz_major  # noqa: E402

#: the comparisons with ArviZ's own functions: the reference is ArviZ 0.23's arithmetic (and API), which ArviZ 1
#: (arviz_stats) changed; they run under Python 3.11, and tests/test_arviz_cross.py checks the summary under ArviZ 1
arviz0 = pytest.mark.skipif(arviz_major() >= 1, reason="compares with ArviZ 0.23's functions")

from dpposterior import convergence  # noqa: E402
from dpposterior.posterior import Posterior  # noqa: E402

TOL = 1e-10


def ar1(rng, chains, draws, rho):
    x = np.empty((chains, draws))
    x[:, 0] = rng.normal(size=chains)
    for t in range(1, draws):
        x[:, t] = rho * x[:, t - 1] + np.sqrt(1 - rho**2) * rng.normal(size=chains)
    return x


KINDS = {
    "iid": lambda rng, c, d: rng.normal(size=(c, d)),
    "ar0.9": lambda rng, c, d: ar1(rng, c, d, 0.9),
    "ar0.995": lambda rng, c, d: ar1(rng, c, d, 0.995),
    "antithetic": lambda rng, c, d: ar1(rng, c, d, -0.7),
    "cauchy": lambda rng, c, d: rng.standard_cauchy(size=(c, d)),
    "shifted": lambda rng, c, d: rng.normal(size=(c, d)) + np.arange(c)[:, None],
    "ties": lambda rng, c, d: rng.integers(0, 3, size=(c, d)).astype(float),
    "binary": lambda rng, c, d: (rng.random((c, d)) < 0.1).astype(float),
    "constant": lambda rng, c, d: np.full((c, d), 2.5),
    "constant-per-chain": lambda rng, c, d: np.repeat(np.arange(c, dtype=float)[:, None], d, axis=1),
    "scaled": lambda rng, c, d: 1e8 + 1e-3 * rng.normal(size=(c, d)),
    "one-nan": lambda rng, c, d: np.where(np.arange(c * d).reshape(c, d) == (c * d) // 2, np.nan,
                                          rng.normal(size=(c, d))),
}
SHAPES = [(1, 4), (1, 9), (2, 4), (2, 5), (2, 7), (3, 50), (4, 101), (4, 1000), (8, 64), (1, 333)]


def close(ours, theirs):
    theirs = float(theirs)
    if np.isnan(theirs):
        return np.isnan(ours)
    if np.isinf(theirs):
        return ours == theirs
    return abs(ours - theirs) <= TOL * max(1.0, abs(theirs))


def cases():
    for (kind, make), (chains, draws), seed in itertools.product(KINDS.items(), SHAPES, range(3)):
        yield kind, chains, draws, seed, make(np.random.default_rng([seed, chains, draws]), chains, draws)


@arviz0
@pytest.mark.parametrize("kind", list(KINDS))
def test_rhat_and_ess_equal_arviz(kind):
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ warns about NaN and 0/0 (constant chains)
        for name, chains, draws, seed, x in cases():
            if name != kind:
                continue
            where = f"{kind} {chains}x{draws} seed {seed}"
            if kind != "constant-per-chain":  # (see the next test)
                assert close(convergence.rhat(x), az.rhat(x, method="rank")), where
            assert close(convergence.ess_bulk(x), az.ess(x, method="bulk")), where
            assert close(convergence.ess_tail(x), az.ess(x, method="tail")), where
            checked += 1
    assert checked == len(SHAPES) * 3


@arviz0
def test_chains_that_never_move_have_infinite_rhat():
    """Chains each constant at a different value: the within-chain variance is 0, so R-hat is infinite.
    Ours is infinite or huge (np.var of equal values leaves ~1e-32); ArviZ (with numba) computes that
    variance as E[x^2] - E[x]^2, gets +-2e-16 from rounding, and returns NaN or a large number -- a NaN
    would hide stuck chains from dpposterior.checks, so here we do not follow it."""
    for chains, draws in [(2, 4), (3, 50), (4, 101)]:
        x = KINDS["constant-per-chain"](None, chains, draws)
        assert convergence.rhat(x) > 1e6
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = float(az.rhat(x, method="rank"))
        assert not np.isfinite(theirs) or theirs > 1e6


@arviz0
@pytest.mark.parametrize("n", [1, 5, 16, 100, 1023])
def test_hdi_equals_arviz(n):
    rng = np.random.default_rng(n)
    for prob in (0.5, 0.9, 0.95, 0.99):
        x = rng.gamma(2.0, size=n)
        lo, hi = convergence.hdi(x, prob)
        ref = az.hdi(x, hdi_prob=prob)
        assert (lo, hi) == (ref[0], ref[1])


def test_next_fast_len_is_five_smooth():
    from scipy.fftpack import next_fast_len

    for n in list(range(1, 400)) + [1021, 2000, 4097, 10007, 65537]:
        assert convergence.next_fast_len(n) == next_fast_len(n), n


def posterior(chains, draws, seed=0, padded=False):
    rng = np.random.default_rng(seed)
    post = {"mu": ar1(rng, chains, draws, 0.8), "p": rng.dirichlet([1, 2, 3], size=(chains, draws)),
            "beta": rng.normal(size=(chains, draws, 2, 3)), "k": rng.integers(0, 4, size=(chains, draws))}
    if padded:  # a ragged variable: the same cell NaN in every draw (naive Bayes feature_prob)
        post["p"][..., 2] = np.nan
    return Posterior(family="t", method="m", posterior=post, dims={"p": ["category"]},
                     coords={"category": ["a", "b", "c"]})


@arviz0
@pytest.mark.parametrize("chains,draws,padded", [(4, 200, False), (2, 51, False), (1, 100, False),
                                                 (3, 3, False), (2, 40, True)])
def test_summary_rows_equal_arviz_summary(chains, draws, padded):
    post = posterior(chains, draws, padded=padded)
    for prob in (0.95, 0.9):
        columns, rows = convergence.summary_rows(post, hdi_prob=prob)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kind = "all" if chains > 1 and draws > 3 else "stats"
            ref = az.summary(post.to_arviz(), hdi_prob=prob, round_to="none", kind=kind)
        assert columns == [c for c in ref.columns if c not in ("mcse_mean", "mcse_sd")]
        # (the same rows; ArviZ 0.23.4's from_dict orders the variables by name, the Posterior by insertion)
        assert sorted(label for label, _ in rows) == sorted(ref.index)
        for label, values in rows:
            for column, value in zip(columns, values):
                assert close(value, ref.loc[label, column]), (label, column, value, ref.loc[label, column])


@arviz0
@pytest.mark.parametrize("chains,draws,padded", [(4, 200, False), (2, 51, False), (1, 100, False),
                                                 (3, 3, False), (2, 40, True)])
def test_posterior_summary_is_arviz_summary(chains, draws, padded):
    """``Posterior.summary()`` (computed here, MCSE included) is ArviZ 0.23's ``az.summary(hdi_prob=)`` cell for
    cell, rounded as it rounds -- the table it gave when it called ArviZ."""
    post = posterior(chains, draws, padded=padded)
    for prob in (0.95, 0.9):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kind = "all" if chains > 1 and draws > 3 else "stats"
            ref = az.summary(post.to_arviz(), hdi_prob=prob, kind=kind)
        ref = ref[~ref.isna().all(axis=1) & ref["mean"].notna()]
        got = post.summary(hdi_prob=prob)
        assert list(got.columns) == list(ref.columns) and list(got.index) == list(ref.index)
        assert ((got == ref) | (got.isna() & ref.isna())).all().all(), (got, ref)
        raw = post.summary(hdi_prob=prob, var_names=["mu"])
        assert list(raw.index) == ["mu"] and (raw.loc["mu"].fillna(-1) == got.loc["mu"].fillna(-1)).all()


@pytest.mark.parametrize("chains,draws,padded", [(4, 200, False), (2, 51, True), (1, 100, False), (2, 3, False)])
def test_printed_table_is_arviz_summary_rounded(chains, draws, padded):
    """The table ``dpposterior infer`` prints: the same cells as it printed from ``post.summary()``."""
    from rich.markup import escape

    from dpposterior.console import summary_table

    post = posterior(chains, draws, seed=7, padded=padded)
    table = summary_table(post, "t")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = post.summary(hdi_prob=0.95)
    cols = [c for c in df.columns if c in ("mean", "sd", "hdi_2.5%", "hdi_97.5%", "ess_bulk", "r_hat")]
    assert [c.header for c in table.columns] == ["variable", *cols]
    # ArviZ's rounding, but a nonzero value that would print as 0 gets 3 significant digits (docs/cli.md, "infer")
    from dpposterior.units import significant

    names, raw = convergence.summary_rows(post, hdi_prob=0.95)
    raw = {label: dict(zip(names, values)) for label, values in raw}

    def cell(label, column, rounded):
        value = raw[label][column]
        if rounded == 0 and value != 0 and column in ("mean", "sd", "hdi_2.5%", "hdi_97.5%"):
            return significant(value)
        return f"{rounded:.4g}"

    expected = {escape(label): [cell(label, c, row[c]) for c in cols] for label, row in df.iterrows()}
    printed = [list(c._cells) for c in table.columns]
    # (row by row; ArviZ 0.23.4's from_dict orders the variables by name, the table by insertion)
    assert {label: [col[i] for col in printed[1:]] for i, label in enumerate(printed[0])} == expected


@arviz0
def test_checks_warn_with_arviz_numbers():
    """dpposterior.checks (after every infer) now uses these functions: same warnings, same numbers."""
    from dpposterior.checks import mcmc_warnings

    rng = np.random.default_rng(3)
    post = Posterior(family="t", method="m", posterior={"a": rng.normal(size=(4, 60)) + np.arange(4)[:, None],
                                                        "b": ar1(rng, 4, 60, 0.97)})
    warned = mcmc_warnings(post)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rhat = {k: float(az.rhat(v, method="rank")) for k, v in post.posterior.items()}
        ess = {k: float(az.ess(v, method="bulk")) for k, v in post.posterior.items()}
    worst_rhat, worst_ess = max(rhat, key=rhat.get), min(ess, key=ess.get)
    assert warned[0].startswith(f"R-hat {rhat[worst_rhat]:.3f} > 1.01 for {worst_rhat}:")
    assert warned[1].startswith(f"bulk ESS {ess[worst_ess]:.0f} < 400 for {worst_ess}:")


@arviz0
@pytest.mark.parametrize("chains,draws", [(4, 101), (2, 50), (1, 40), (3, 8)])
def test_diagnose_all_components_at_once_equals_arviz(chains, draws, monkeypatch):
    """One vectorised call over many components of every kind (ties, constant, NaN, stuck chains, heavy
    tails), in blocks smaller than the array (the block boundary falls inside the kinds), equals ArviZ
    one component at a time to 1e-10 relative."""
    monkeypatch.setattr(convergence, "BLOCK_VALUES", 7 * chains * draws)
    rng = np.random.default_rng([chains, draws])
    columns = [make(rng, chains, draws) for make in KINDS.values() for _ in range(3)]
    columns += [ar1(rng, chains, draws, rho) for rho in rng.uniform(-0.9, 0.999, size=20)]
    arr = np.stack(columns, axis=-1).reshape(chains, draws, -1, 2)  # a 2-d event shape, C order
    got = convergence.diagnose(arr)
    split = convergence.diagnose(arr, ("rhat",), fold_split=False)
    assert got["rhat"].shape == arr.shape[2:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for index in np.ndindex(*arr.shape[2:]):
            x = arr[(slice(None), slice(None), *index)]
            if not (chains > 1 and np.all(np.ptp(x, axis=1) == 0) and np.ptp(x) > 0):  # constant-per-chain
                assert close(got["rhat"][index], az.rhat(x, method="rank")), index
                ref = az.summary(x[None].transpose(1, 2, 0).reshape(chains, draws), kind="diagnostics",
                                 round_to="none")["r_hat"].iloc[0] if chains > 1 else np.nan
                assert close(split["rhat"][index], ref), index
            assert close(got["ess_bulk"][index], az.ess(x, method="bulk")), index
            assert close(got["ess_tail"][index], az.ess(x, method="tail")), index


@arviz0
def test_hdi_rows_equal_hdi():
    rng = np.random.default_rng(5)
    x = rng.gamma(2.0, size=(30, 401))
    lo, hi = convergence.hdi_rows(x, 0.9)
    for k in range(30):
        assert (lo[k], hi[k]) == tuple(float(v) for v in az.hdi(x[k], hdi_prob=0.9))


@arviz0
def test_checks_diagnose_every_component():
    """A component that has not converged is found however far into a large variable it is (the checks
    once looked at the first 64 components only)."""
    from dpposterior.checks import mcmc_warnings

    rng = np.random.default_rng(11)
    u = rng.normal(size=(4, 500, 3000))
    u[:, :, 2718] += np.arange(4)[:, None]  # chains that disagree, in one area of 3000
    post = Posterior(family="t", method="m", posterior={"alpha": rng.normal(size=(4, 500)), "u": u})
    warned = mcmc_warnings(post)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = float(az.rhat(u[:, :, 2718], method="rank"))
    assert warned[0].startswith(f"R-hat {expected:.3f} > 1.01 for u[2718]:")


def test_terminal_table_computes_only_the_rows_it_shows(monkeypatch):
    """A variable with thousands of components: the table prints its first rows and a count, and the
    intervals and diagnostics are computed for those rows only."""
    from dpposterior.console import FIRST_ROWS_SHOWN, summary_table

    rng = np.random.default_rng(2)
    post = Posterior(family="t", method="m", posterior={"alpha": rng.normal(size=(2, 50)),
                                                        "u": rng.normal(size=(2, 50, 5000))},
                     dims={"u": ["area"]}, coords={"area": [f"a{i}" for i in range(5000)]})
    seen = []
    original = convergence.diagnose
    monkeypatch.setattr(convergence, "diagnose", lambda arr, *a, **k: seen.append(np.shape(arr)) or original(arr, *a, **k))
    table = summary_table(post, "t")
    assert list(table.columns[0]._cells) == ["alpha", *[f"u\\[a{i}]" for i in range(FIRST_ROWS_SHOWN)],
                                             f"... {5000 - FIRST_ROWS_SHOWN} more u"]
    assert max(int(np.prod(s[2:])) for s in seen) == FIRST_ROWS_SHOWN


def test_comparison_posteriors_skip_the_convergence_checks():
    """api.naive_companion's posterior is shown beside the main one, its warnings never: no diagnostics."""
    from dpposterior.checks import mcmc_warnings, without_mcmc_checks

    rng = np.random.default_rng(3)
    post = Posterior(family="t", method="m", posterior={"a": rng.normal(size=(4, 60)) + np.arange(4)[:, None]})
    with without_mcmc_checks():
        assert mcmc_warnings(post) == []
    assert mcmc_warnings(post)[0].startswith("R-hat")


def test_diagnose_in_threads_equals_the_serial_loop(monkeypatch):
    """Blocks of components diagnosed in threads give the serial loop's numbers, bit for bit."""
    rng = np.random.default_rng(11)
    arr = rng.standard_normal((3, 60, 41)).cumsum(axis=1)
    monkeypatch.setattr(convergence, "BLOCK_VALUES", 3 * 60 * 4)  # 11 blocks
    monkeypatch.setattr(convergence, "MAX_THREADS", 1)
    serial = convergence.diagnose(arr)
    monkeypatch.setattr(convergence, "MAX_THREADS", 4)
    monkeypatch.setattr(convergence.os, "cpu_count", lambda: 4)
    threaded = convergence.diagnose(arr)
    for name in serial:
        np.testing.assert_array_equal(threaded[name], serial[name])


@pytest.mark.parametrize("chains,draws", [(2, 50), (4, 101), (3, 8), (2, 4)])
def test_compiled_diagnostics_give_numpys_numbers(chains, draws, monkeypatch):
    """Large posteriors are diagnosed by compiled kernels: the rank normalisation gives numpy's numbers bit for bit,
    the ESS and R-hat (autocovariances summed directly, not by FFT) to rounding, on every kind of chain (ties,
    constant and non-finite components take their own paths), odd and even draw counts."""
    rng = np.random.default_rng([chains, draws])
    parts = [make(rng, chains, draws) for make in KINDS.values()] + [np.round(rng.normal(size=(chains, draws)) * 2)]
    arr = np.stack(parts * 5, axis=-1)  # (chain, draw, components)
    monkeypatch.setattr(convergence, "BLOCK_VALUES", chains * draws * 7)  # blocks with and without NaN
    monkeypatch.setattr(convergence, "KERNEL_MIN_VALUES", 10 ** 18)
    plain = convergence.diagnose(arr)
    monkeypatch.setattr(convergence, "KERNEL_MIN_VALUES", 1)
    calls = []
    real = convergence._Compiled
    monkeypatch.setattr(convergence, "_Compiled", lambda: calls.append(1) or real())
    compiled = convergence.diagnose(arr)
    assert calls, "the compiled path was not taken"
    for name in plain:
        same_to_rounding(compiled[name], plain[name])
    # R-hat and bulk ESS alone (the checks after every engine) read the split chains gathered straight from the
    # draws when the draw count is even: the same numbers bit for bit
    for which in (("ess_bulk", "rhat"), ("ess_bulk",), ("rhat",)):
        alone = convergence.diagnose(arr, which)
        for name in which:
            np.testing.assert_array_equal(alone[name], compiled[name])
    split = convergence.split_chains(np.ascontiguousarray(np.moveaxis(arr, -1, 0)))
    finite = split[np.isfinite(split).all(axis=(1, 2))]
    for ours, numpys in zip(convergence._z_and_folded_z(finite, convergence._Compiled().z_and_folded),
                            convergence._z_and_folded_z(finite)):
        np.testing.assert_array_equal(ours, numpys)


def same_to_rounding(ours, numpys):
    """Equal to 1e-12 relative; NaN where numpy has NaN; and where numpy's R-hat is 'infinite' (chains each
    constant at different values: a within-chain variance of 0, or of 1e-33 from the rounding of a mean), ours is
    too (inf or above 1e12)."""
    ours, numpys = np.asarray(ours), np.asarray(numpys)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(numpys))
    huge = ~np.isnan(numpys) & (numpys > 1e12)
    assert (ours[huge] > 1e12).all(), (ours[huge], numpys[huge])
    rest = ~np.isnan(numpys) & ~huge
    np.testing.assert_allclose(ours[rest], numpys[rest], rtol=1e-12, atol=0)


@pytest.mark.parametrize("chains,draws", SHAPES)
def test_compiled_ess_and_rhat_rows_match_numpy(chains, draws):
    """The compiled ESS reads Geyer's sequence lag by lag as far as it goes (a mixing chain: a few lags; AR(0.995):
    to the last pair) and must agree with the FFT version to rounding, NaN and constant rows included.  Not the
    ``scaled`` chains (1e8 + 1e-3 noise): there the FFT's rounding is relative to the offset and the two differ
    in the fifth digit; diagnose gives these kernels rank-normalised values only (checked above)."""
    rng = np.random.default_rng([7, chains, draws])
    x = np.stack([make(rng, chains, draws) for name, make in KINDS.items() if name != "scaled"] * 3)
    compiled = convergence._Compiled()
    same_to_rounding(compiled.ess_rows(x), convergence._ess_rows(x))
    if chains > 1 and draws > 1:
        with np.errstate(divide="ignore", invalid="ignore"):
            same_to_rounding(compiled.rhat_rows(x), convergence._rhat_rows(x))


def test_compiled_ranks_match_on_ties_around_the_median():
    """Values placed symmetrically about the median tie in distance across the two merged runs."""
    from dpposterior.convergence_kernels import z_and_folded

    rng = np.random.default_rng(3)
    for n in (4, 5, 10, 11, 100):
        flat = rng.integers(-3, 4, size=(200, n)).astype(float)
        flat[::3] = np.round(rng.normal(size=(flat[::3].shape))) * 0.5
        x = flat.reshape(200, 1, n)
        z, folded = convergence._z_and_folded_z(x)
        z2, folded2 = convergence._z_and_folded_z(x, z_and_folded)
        np.testing.assert_array_equal(z2, z)
        np.testing.assert_array_equal(folded2, folded)
