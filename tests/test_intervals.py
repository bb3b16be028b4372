"""The HPD and equal-tailed intervals of integer draws (dpposterior.intervals): ArviZ's ``hdi`` where draws do
not tie, brute force over every integer interval where they do, and the mass each holds."""
import arviz as az
import numpy as np
import pytest

from dpposterior.intervals import equal_tailed, hpd, interval


def test_continuous_draws_match_arviz_hdi():
    rng = np.random.default_rng(3)
    draws = np.column_stack([rng.gamma(a, size=997) for a in (0.3, 1.0, 2.5, 40.0)]
                            + [rng.normal(size=997), rng.standard_t(3, size=997)])
    for prob in (0.5, 0.9, 0.95):
        lo, hi = hpd(draws, prob)
        for c in range(draws.shape[1]):
            ref = az.hdi(draws[:, c], hdi_prob=prob)
            assert (lo[c], hi[c]) == (ref[0], ref[1])


def _brute_force(x: np.ndarray, prob: float) -> tuple[int, int]:
    """Every integer interval [a, b] of the draws' range holding at least floor(prob n) + 1 draws: the shortest,
    then the one holding most, then the lowest."""
    n = x.size
    need = int(np.floor(prob * n)) + 1
    best = None
    for a in range(x.min(), x.max() + 1):
        for b in range(a, x.max() + 1):
            held = int(np.sum((x >= a) & (x <= b)))
            if held >= need:
                key = (b - a, -held, a)
                if best is None or key < best[0]:
                    best = (key, (a, b))
                break
    return best[1]


@pytest.mark.parametrize("seed", range(6))
def test_integer_draws_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    laws = [rng.poisson(0.4, 400), rng.poisson(3.0, 400), rng.negative_binomial(2, 0.3, 400),
            rng.binomial(12, 0.5, 400), 50 - rng.poisson(2.0, 400), rng.integers(0, 3, 400),
            np.concatenate([rng.poisson(1, 200), 30 + rng.poisson(1, 200)])]
    draws = np.column_stack(laws)
    for prob in (0.5, 0.8, 0.9):
        lo, hi = hpd(draws, prob)
        for c in range(draws.shape[1]):
            assert (lo[c], hi[c]) == _brute_force(draws[:, c], prob), (c, prob)


def test_first_tie_rule_is_arviz_hdi_on_integer_draws():
    """ties="first" (convergence.hdi_rows, the summary tables' HDI) keeps ArviZ's lowest window where integer
    draws tie; the default differs from it there and only there: same width, at least as much mass."""
    rng = np.random.default_rng(8)
    tied = np.repeat([0, 1, 2, 3], [4, 90, 90, 16])  # [0, 2] holds 184 of 200 draws, [1, 3] 196: both width 2
    draws = np.column_stack([rng.poisson(lam, 200) for lam in (0.5, 2.0, 6.0, 25.0)] + [rng.permutation(tied)])
    lo, hi = hpd(draws, 0.9, ties="first")
    hlo, hhi = hpd(draws, 0.9)
    for c in range(draws.shape[1]):
        assert (lo[c], hi[c]) == tuple(az.hdi(draws[:, c], hdi_prob=0.9))
        held = np.mean((draws[:, c] >= hlo[c]) & (draws[:, c] <= hhi[c]))
        assert hhi[c] - hlo[c] == hi[c] - lo[c]
        assert held >= np.mean((draws[:, c] >= lo[c]) & (draws[:, c] <= hi[c]))
    assert (lo[-1], hi[-1], hlo[-1], hhi[-1]) == (0, 2, 1, 3)
    with pytest.raises(ValueError, match="ties"):
        hpd(draws, 0.9, ties="last")


def test_hpd_at_zero_is_one_sided_and_holds_less_than_equal_tailed():
    """A posterior piled at zero: the equal-tailed '90%' interval [0, q95] holds 0.95 or more, the HPD one
    [0, q90] holds 0.90 or more and no more than it."""
    rng = np.random.default_rng(11)
    x = rng.poisson(2.0, size=(4000, 1))
    lo, hi = hpd(x, 0.9)
    elo, ehi = equal_tailed(x, 0.9)
    held = np.mean((x >= lo) & (x <= hi))
    held_et = np.mean((x >= elo) & (x <= ehi))
    assert lo[0] == elo[0] == 0
    assert hi[0] == np.quantile(x, 0.9, method="inverted_cdf")
    assert 0.9 <= held < held_et
    assert held_et >= 0.95


def test_shapes_chunks_and_errors():
    rng = np.random.default_rng(5)
    x = rng.poisson(2.0, size=(300, 3, 5000))  # 15,000 cells: two chunks
    lo, hi = interval(x, 0.9)
    assert lo.shape == hi.shape == (3, 5000)
    flat_lo, flat_hi = hpd(x.reshape(300, -1), 0.9)
    assert np.array_equal(lo.ravel(), flat_lo) and np.array_equal(hi.ravel(), flat_hi)
    held = np.mean((x >= lo) & (x <= hi), axis=0)
    assert held.min() >= 0.9
    a, b = interval(x, 0.9, "equal-tailed")
    assert np.array_equal(a, np.quantile(x, 0.05, axis=0, method="inverted_cdf"))
    assert np.array_equal(b, np.quantile(x, 0.95, axis=0, method="inverted_cdf"))
    with pytest.raises(ValueError, match="interval kind"):
        interval(x, 0.9, "central")
    with pytest.raises(ValueError, match="too few"):
        hpd(np.zeros((0, 2)), 0.9)
