"""The ``marginals`` family: release schema, the decomposable model, the exact data-augmentation engine against
brute-force enumeration, privacy by search over neighbouring tables, marginals and synthetic data.

Statistical checks use fixed seeds and tolerances from the Monte Carlo error of the draws (ESS-based); they are
statistical on any CPU (not bit-identical across CPUs).
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.special import gammaln

from dpposterior import infer, load_release
from dpposterior.cliques import JunctionTree, triangulate
from dpposterior.errors import InputError
from dpposterior.families.marginals import SENSITIVITY, MarginalQuery, observation_model, variable_name
from dpposterior.mechanisms.registry import get_mechanism

from _one_way import one_way_reference

DOMAIN = {"a": 2, "b": 2, "c": 2}
#: a - b - c, n = 5: the discrete case every exact check below enumerates
CHAIN_MEASUREMENTS = [
    {"clique": ["a", "b"], "value": [[2, 0], [1, 2]], "mechanism": "discrete-gaussian", "sigma": 0.8},
    {"clique": ["b", "c"], "value": [[1, 2], [0, 3]], "mechanism": "discrete-laplace", "epsilon": 2.0}]


def _release(measurements, n=5, domain=None, **extra):
    return {"format": "dpposterior-release/1", "family": "marginals", "n": n, "domain": domain or DOMAIN,
            "measurements": measurements, **extra}


# --------------------------------------------------------------------------- schema
@pytest.mark.parametrize("bad, field", [
    ({"clique": ["a", "z"], "value": [[1, 2], [3, 4]], "mechanism": "discrete-gaussian", "sigma": 1.0}, "clique"),
    ({"clique": ["a", "b"], "value": [1, 2], "mechanism": "discrete-gaussian", "sigma": 1.0}, "shape"),
    ({"clique": ["a", "a"], "value": [[1, 2], [3, 4]], "mechanism": "discrete-gaussian", "sigma": 1.0}, "twice"),
    ({"clique": ["a"], "value": [1, 2], "mechanism": "discrete-laplace", "epsilon": 1.0, "sensitivity": 1.0},
     "sensitivity"),
    ({"clique": ["a"], "value": [1.5, 2], "mechanism": "discrete-gaussian", "sigma": 1.0}, "integer"),
    ({"clique": ["a"], "value": [1, 2], "mechanism": "binomial-trajectory", "trials": 3, "m": 1.0}, "mechanism"),
    ({"clique": ["a"], "value": [1, 900], "mechanism": "discrete-gaussian", "sigma": 1.0}, "inconsistent"),
])
def test_release_refuses_bad_measurements_naming_the_field(bad, field):
    with pytest.raises(InputError) as err:
        load_release(_release([bad]))
    assert "measurements.0" in str(err.value)
    assert field in str(err.value)


def test_release_refuses_bad_labels_and_domain():
    good = {"clique": ["a"], "value": [1, 2], "mechanism": "discrete-gaussian", "sigma": 1.0}
    with pytest.raises(InputError, match="labels.a"):
        load_release(_release([good], labels={"a": ["x"]}))
    with pytest.raises(InputError, match="domain"):
        load_release(_release([good], domain={"a": 0, "b": 2}))


def test_sensitivity_is_derived_in_each_mechanisms_norm():
    rel = load_release(_release([
        {"clique": ["a"], "value": [1, 2], "mechanism": "discrete-gaussian", "sigma": 1.0},
        {"clique": ["b"], "value": [1, 2], "mechanism": "discrete-laplace", "epsilon": 1.0},
        {"clique": ["c"], "value": [1.5, 2.0], "mechanism": "laplace", "epsilon": 1.0}]))
    assert rel.measurements[0].sensitivity == pytest.approx(math.sqrt(2))
    assert rel.measurements[1].sensitivity == 2.0
    assert rel.mechanism(1).noise_scale == pytest.approx(2.0)  # b = 2 / epsilon
    assert rel.mechanism(2).noise_scale == pytest.approx(2.0)


# --------------------------------------------------------------------------- privacy: sensitivity by search
def test_replace_one_sensitivity_of_every_marginal_found_by_search():
    """Every data set of 3 records over a (2, 3, 2) domain, every record replaced by every other value: the
    largest change of each marginal table (as broadcast: the full count table) in L1, L2 and L-infinity."""
    domain = {"a": 2, "b": 3, "c": 2}
    cells = list(itertools.product(*(range(s) for s in domain.values())))
    cliques = [("a",), ("b",), ("a", "b"), ("b", "c"), ("a", "b", "c")]
    worst = {norm: 0.0 for norm in SENSITIVITY}
    for data in itertools.product(cells, repeat=3):
        recs = np.array(data)
        for new in cells:
            other = recs.copy()
            other[0] = new
            for clique in cliques:
                q = MarginalQuery(clique, list(domain), domain)
                diff = (q(recs) - q(other)).ravel()
                worst["L1"] = max(worst["L1"], np.abs(diff).sum())
                worst["L2"] = max(worst["L2"], float(np.sqrt((diff ** 2).sum())))
                worst["Linf"] = max(worst["Linf"], np.abs(diff).max())
    assert worst == pytest.approx(SENSITIVITY)


def test_release_privacy_composes_every_measurements_worst_pair():
    """Two discrete-Gaussian marginals: rho = 2 x (sqrt 2)^2 / (2 sigma^2) exactly; epsilon from dp-accounting's
    composition of the four unit shifts, equal to the exact epsilon of one discrete Gaussian whose worst pair moves
    four coordinates (computed here independently with dp-accounting)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    sigma = 3.0
    rel = load_release(_release([
        {"clique": ["a", "b"], "value": [[1, 2], [1, 1]], "mechanism": "discrete-gaussian", "sigma": sigma},
        {"clique": ["b", "c"], "value": [[2, 1], [1, 1]], "mechanism": "discrete-gaussian", "sigma": sigma}]))
    cost = rel.privacy()
    assert cost.rho == pytest.approx(2 * 2.0 / (2 * sigma ** 2))
    one = pld.from_discrete_gaussian_mechanism(sigma, sensitivity=1, pessimistic_estimate=True)
    total = one.self_compose(4)
    assert cost.epsilon == pytest.approx(total.get_epsilon_for_delta(cost.delta), rel=2e-3)


# --------------------------------------------------------------------------- the decomposable model
def test_triangulation_adds_a_chord_to_a_four_cycle_and_the_tree_has_running_intersection():
    attrs = ["a", "b", "c", "d"]
    sizes = dict.fromkeys(attrs, 2)
    cliques = triangulate(attrs, [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")], sizes)
    assert sorted(len(c) for c in cliques) == [3, 3]
    tree = JunctionTree.build(attrs, [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")], sizes)
    for k, c in enumerate(tree.cliques):  # running intersection: the separator is c ∩ (all earlier cliques)
        earlier = set().union(*tree.cliques[:k]) if k else set()
        assert set(tree.separators[k]) == set(c) & earlier


#: Adult's 14 attributes as Private-PGM codes them, and an MST selection of pairs (a tree) made on it
ADULT14_SIZES = {"age": 85, "workclass": 9, "fnlwgt": 100, "education-num": 16, "marital-status": 7,
                 "occupation": 15, "relationship": 6, "race": 5, "sex": 2, "capital-gain": 100, "capital-loss": 100,
                 "hours-per-week": 99, "native-country": 42, "income>50K": 2}
ADULT14_MST = [("marital-status", "relationship"), ("age", "marital-status"), ("relationship", "sex"),
               ("education-num", "occupation"), ("workclass", "occupation"), ("occupation", "hours-per-week"),
               ("relationship", "income>50K"), ("age", "hours-per-week"), ("age", "fnlwgt"),
               ("capital-gain", "income>50K"), ("capital-gain", "capital-loss"), ("fnlwgt", "native-country"),
               ("fnlwgt", "race")]


def test_a_chordal_graph_gets_no_fill_in():
    """A tree of measured pairs is chordal: its cliques are the model's, with no interaction that no measurement
    informs.  Eliminating the vertex of the fewest cells first (min-weight alone) eliminated relationship, an inner
    vertex of few levels, before the leaves and made (age, marital-status, income>50K) a clique here."""
    cliques = triangulate(list(ADULT14_SIZES), ADULT14_MST, ADULT14_SIZES)
    assert {frozenset(c) for c in cliques} == {frozenset(c) for c in ADULT14_MST}
    # a chordal graph with a triangle and a 4-clique: the maximal cliques come back as they are
    attrs = ["a", "b", "c", "d", "e", "f"]
    given = [("a", "b", "c", "d"), ("c", "d", "e"), ("e", "f"), ("b", "f")]  # (b, f) closes a cycle: not chordal
    chordal = given[:3]
    sizes = dict(zip(attrs, (2, 3, 2, 4, 2, 3)))
    assert {frozenset(c) for c in triangulate(attrs, chordal, sizes)} == {frozenset(c) for c in chordal}
    tri = triangulate(attrs, given, sizes)
    assert all(any(set(g) <= set(c) for c in tri) for g in given)
    assert len(tri) >= 2


def test_marginal_by_elimination_equals_the_full_joint():
    rng = np.random.default_rng(4)
    attrs = ["a", "b", "c", "d"]
    sizes = {"a": 2, "b": 3, "c": 2, "d": 4}
    tree = JunctionTree.build(attrs, [("a", "b"), ("b", "c"), ("c", "d")], sizes)
    tables = tree.prior_draw(5.0, rng)
    joint = np.ones([sizes[a] for a in attrs])
    for k, c in enumerate(tree.cliques):  # p(x) = prod_C p_C / prod_S p_S, built on the full table
        f = tables[k] if tree.parents[k] < 0 else np.exp(tree.log_conditionals(tables)[k])
        joint = joint * np.expand_dims(np.transpose(f, [c.index(a) for a in attrs if a in c]),
                                       [i for i, a in enumerate(attrs) if a not in c])
    assert joint.sum() == pytest.approx(1.0)
    for want in [("a", "d"), ("d", "a"), ("b", "d"), ("a", "c", "d"), ("c",)]:
        ref = joint.sum(axis=tuple(i for i, a in enumerate(attrs) if a not in want))
        ref = np.transpose(ref, np.argsort(np.argsort([attrs.index(a) for a in want])))
        assert tree.marginal(tables, want) == pytest.approx(ref, abs=1e-12)
    # forward sampling follows the joint (chi-square-sized tolerance)
    recs = tree.sample_records(tables, 200_000, rng)
    freq = np.bincount(np.ravel_multi_index(recs.T, tuple(sizes.values())), minlength=joint.size) / len(recs)
    assert np.abs(freq - joint.ravel()).max() < 5 * np.sqrt(joint.max() / len(recs))


def test_prior_draws_have_the_hyper_dirichlet_mean():
    rng = np.random.default_rng(5)
    tree = JunctionTree.build(["a", "b", "c"], [("a", "b"), ("b", "c")], {"a": 2, "b": 3, "c": 2})
    draws = [tree.prior_draw(3.0, rng) for _ in range(4000)]
    for k, c in enumerate(tree.cliques):
        mean = np.mean([d[k] for d in draws], axis=0)
        # Dirichlet(3/6 each): var = (1/6)(5/6)/4; 4000 draws
        assert mean == pytest.approx(np.full(tree.shape(c), 1 / 6), abs=5 * math.sqrt(5 / 144 / 4000))


# --------------------------------------------------------------------------- the engine against enumeration
def _enumeration_posterior(release, concentration):
    """E[p_C | y] for every junction-tree clique and E[p(a, c) | y] by summing over every table of n records:
    weight(x) = P(x | hyper-Dirichlet) * prod_m eta_m(y_m | t_m(x)) (Dawid & Lauritzen 1993, Sec. 7)."""
    model = observation_model(release, {"concentration": concentration})
    tree = model.latent.state
    attrs = list(tree.attributes)
    cells = list(itertools.product(*(range(tree.sizes[a]) for a in attrs)))
    n = release.n
    alpha = tree.prior_alpha(concentration)

    def log_dm(counts, alph):  # log Dirichlet-multinomial of ordered records
        return (gammaln(alph.sum()) - gammaln(alph.sum() + counts.sum())
                + (gammaln(alph + counts) - gammaln(alph)).sum())

    logw, means, ac = [], [], []
    for combo in itertools.combinations_with_replacement(range(len(cells)), n):
        recs = np.array([cells[i] for i in combo])
        x = np.bincount(combo, minlength=len(cells))
        tc = tree.clique_counts(recs)
        lw = gammaln(n + 1) - gammaln(x + 1).sum()
        for k, c in enumerate(tree.cliques):
            lw += log_dm(tc[k], alpha[k])
            if tree.parents[k] >= 0:
                sep = tree.separators[k]
                s_t = tree.marginal_of_table(tc[k], c, sep)
                s_a = tree.marginal_of_table(alpha[k], c, sep)
                lw -= log_dm(s_t, s_a)
        for meas in model.measurements:
            lw += float(np.sum(meas.mechanism.logpdf(meas.values, meas.query(recs))))
        logw.append(lw)
        post = [(alpha[k] + tc[k]) / (concentration + n) for k in range(len(tree.cliques))]
        means.append(post)
        # E[p(a, c) | x]: root (a, b) times E[p(c | b)] of the child (b, c), independent under the posterior
        ac.append(tree.marginal(post, ("a", "c")))
    w = np.exp(np.array(logw) - max(logw))
    w /= w.sum()
    exp = [sum(wi * m[k] for wi, m in zip(w, means)) for k in range(len(tree.cliques))]
    return tree, exp, sum(wi * m for wi, m in zip(w, ac))


def _ess_se(draws):
    """Monte Carlo standard error of the mean per cell (ArviZ's ESS)."""
    import arviz as az

    flat = draws.reshape(draws.shape[0], draws.shape[1], -1)
    ess = np.array([az.ess(flat[:, :, i]) for i in range(flat.shape[2])])
    return (flat.std(axis=(0, 1)) / np.sqrt(np.maximum(ess, 1.0))).reshape(draws.shape[2:])


@pytest.mark.parametrize("mechanisms", [("discrete-gaussian", "discrete-laplace"), ("gaussian", "laplace")])
def test_da_matches_enumeration_on_a_chain_of_two_marginals(mechanisms):
    """a - b - c, both two-way marginals measured with tight-ish noise, n = 5: the posterior means of both clique
    tables and of the unmeasured (a, c) margin within 5 Monte Carlo standard errors of the enumeration."""
    from dpposterior.mechanisms.gaussian import Gaussian

    first, second = mechanisms
    sigma = Gaussian.calibrated_scale(5.0, 1e-2, math.sqrt(2))  # ~0.9: tight noise, so the data count
    fields = {"discrete-gaussian": {"sigma": 0.8}, "discrete-laplace": {"epsilon": 2.0},
              "gaussian": {"sigma": sigma, "epsilon": 5.0, "delta": 1e-2}, "laplace": {"epsilon": 2.0}}
    values = ([[2, 0], [1, 2]], [[1, 2], [0, 3]]) if first != "gaussian" else \
        ([[2.3, -0.4], [0.8, 2.1]], [[1.2, 1.6], [0.2, 2.7]])
    measurements = [{"clique": ["a", "b"], "value": values[0], "mechanism": first, **fields[first]},
                    {"clique": ["b", "c"], "value": values[1], "mechanism": second, **fields[second]}]
    extra = {}
    release = load_release(_release(measurements, n=5, **extra))
    conc = 2.0
    tree, exp, exp_ac = _enumeration_posterior(release, conc)
    post = infer(release, method="da", prior={"concentration": conc}, draws=3000, warmup=300, chains=4, seed=11)
    for k, c in enumerate(tree.cliques):
        draws = post.posterior[variable_name(c)]
        se = _ess_se(draws)
        z = (draws.mean(axis=(0, 1)) - exp[k]) / se
        assert np.abs(z).max() < 5, (c, z)
    ac = post.marginal(["a", "c"]).values
    z = (ac.mean(axis=(0, 1)) - exp_ac) / _ess_se(ac)
    assert np.abs(z).max() < 5, z
    # the naive posterior (noisy counts as true) is far from the reference on the same release
    if first == "discrete-gaussian":
        naive = infer(release, method="naive", prior={"concentration": conc}, draws=4000, seed=1)
        gap = max(np.abs(naive.posterior[variable_name(c)].mean(axis=(0, 1)) - exp[k]).max()
                  for k, c in enumerate(tree.cliques))
        assert gap > 0.02


def test_da_matches_numpyro_nuts_on_the_exact_likelihood():
    """Against code written apart from the package: benchmarks/_marginals_numpyro.py writes the hyper-Dirichlet prior
    and the exact likelihood (every table of n records summed out, each noise law normalised by its own sum) without
    dpposterior's junction tree or mechanisms.  Its enumeration gives this file's reference to 1e-12; NumPyro's NUTS
    on its model and ``da`` both land within 5 Monte Carlo standard errors of it (ESS-based) on both clique tables
    and the unmeasured (a, c) margin; and the check has power: the reference of the same release read with the
    discrete Laplace at epsilon 1 instead of 2 is more than 5 of da's standard errors away (largest |z|: NUTS 1.7,
    da 1.7; the wrong reference 21)."""
    pytest.importorskip("numpyro")
    import sys
    from pathlib import Path

    import jax
    from numpyro.infer import MCMC, NUTS

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from _marginals_numpyro import ExactMarginals

    measurements = CHAIN_MEASUREMENTS
    raw = _release(measurements, n=5)
    conc = 2.0
    exact = ExactMarginals(raw, conc)
    ref = exact.reference()
    tree, exp, exp_ac = _enumeration_posterior(load_release(raw), conc)
    for k, c in enumerate(tree.cliques):
        np.testing.assert_allclose(ref["p_" + "_".join(c)], exp[k], atol=1e-12)
    np.testing.assert_allclose(exact.marginal(ref["joint"], ["a", "c"]), exp_ac, atol=1e-12)

    with jax.enable_x64(True):
        mcmc = MCMC(NUTS(exact.model), num_warmup=500, num_samples=2000, num_chains=2, chain_method="sequential",
                    progress_bar=False)
        mcmc.run(jax.random.PRNGKey(0))
        joint = np.asarray(mcmc.get_samples(group_by_chain=True)["joint"])
    post = infer(raw, method="da", prior={"concentration": conc}, draws=2000, warmup=300, chains=2, seed=4)
    wrong = ExactMarginals(_release([measurements[0], {**measurements[1], "epsilon": 1.0}], n=5), conc)
    wrong_joint = wrong.reference()["joint"]
    far = 0.0
    for attrs in (["a", "b"], ["b", "c"], ["a", "c"]):
        want = exact.marginal(ref["joint"], attrs)
        nuts = exact.marginal(joint, attrs)
        z = (nuts.mean(axis=(0, 1)) - want) / _ess_se(nuts)
        assert np.abs(z).max() < 5, ("numpyro", attrs, z)
        da = post.marginal(attrs).values
        se = _ess_se(da)
        z = (da.mean(axis=(0, 1)) - want) / se
        assert np.abs(z).max() < 5, ("da", attrs, z)
        far = max(far, float(np.abs((exact.marginal(wrong_joint, attrs) - want) / se).max()))
    assert far > 5, far


def test_sparse_one_way_reference_is_the_sum_over_every_table():
    """The reference of the next test against a sum over every table of n records, on cases including one whose
    selected total lies far in the other cells' law's tail (where an FFT convolution is off by 17%)."""
    ref = one_way_reference
    for y, sigma, n in ref.CHECK_CASES:
        np.testing.assert_allclose(ref.exact_big_cell(y, sigma, n, 0), ref.enumeration_reference(y, sigma, n),
                                   rtol=1e-10)


def test_da_matches_the_exact_posterior_of_a_sparse_one_way_table():
    """One clique of 20 levels, one common (1,900 records) and the rest near-empty, noise sigma 8: the common
    level's posterior n p_0 under da within 4 Monte Carlo standard errors (ESS-based) of the exact value (z -1.2),
    where the truncated rare cells' law pulls it 37 records (3 posterior sds) below its noisy count; the naive
    posterior is 3.1 sds below it (z -258), and clt, not asserted here, 0.34 sd above."""
    counts = np.array([1900, 30, 12, 5, 3, 1] + [0] * 14)
    n, sigma = int(counts.sum()), 8.0
    rng = np.random.default_rng(11)
    y = counts + np.rint(rng.normal(0.0, sigma, counts.size)).astype(int)  # a fixture: any y has a posterior
    ref_mean, ref_sd = one_way_reference.exact_big_cell(y.astype(float), sigma, n, 0)
    release = _release([{"clique": ["g"], "value": y.tolist(), "mechanism": "discrete-gaussian", "sigma": sigma}],
                       n=n, domain={"g": counts.size})
    post = infer(release, method="da", draws=1500, warmup=300, chains=4, seed=5, quiet=True)
    x = n * np.asarray(post.marginal(["g"]), float)[..., 0]
    z = (x.mean() - ref_mean) / _ess_se(x[:, :, None])[0]
    assert abs(z) < 4, (x.mean(), ref_mean, z)
    assert abs(x.std() / ref_sd - 1) < 0.1, (x.std(), ref_sd)
    naive = n * np.asarray(infer(release, method="naive", draws=1500, chains=4, seed=5,
                                 quiet=True).marginal(["g"]), float)[..., 0]
    assert abs(naive.mean() - ref_mean) > 10 * _ess_se(naive[:, :, None])[0], (naive.mean(), ref_mean)


def test_group_moves_alone_match_enumeration():
    """The group move alone (the record sweep off), on the enumeration case above (discrete Gaussian + discrete
    Laplace, n = 5): it is irreducible by itself (a block can hold one record), and its draws' means of both clique
    tables and of the unmeasured (a, c) margin lie within 5 Monte Carlo standard errors of the enumeration (largest
    |z| 1.9).  With the binomial factor C(m, d) dropped from the block's conditional the same check fails: z -27 on
    p[a, b], 16 on p[b, c], -19 on the (a, c) margin."""
    from dpposterior.inference.marginals_da import Problem, _run_chain

    measurements = CHAIN_MEASUREMENTS
    release = load_release(_release(measurements, n=5))
    conc = 2.0
    tree, exp, exp_ac = _enumeration_posterior(release, conc)
    prob = Problem(observation_model(release, {"concentration": conc}))
    chains = [_run_chain(prob, conc, 200, 3000, 1, seed, group=3, record_sweep=False)[0] for seed in range(4)]
    for k, c in enumerate(tree.cliques):
        draws = np.stack([ch[k] for ch in chains])
        z = (draws.mean(axis=(0, 1)) - exp[k]) / _ess_se(draws)
        assert np.abs(z).max() < 5, (c, z)
    ac = np.stack([tree.marginal(list(ch), ("a", "c")) for ch in chains])
    z = (ac.mean(axis=(0, 1)) - exp_ac) / _ess_se(ac)
    assert np.abs(z).max() < 5, z


def test_group_moves_alone_keep_the_dirichlet_multinomial_law_of_large_blocks():
    """Blocks of hundreds of records: with a flat likelihood (two margins at sigma 10^5, n = 300, A = 2, so the
    posterior of the counts is the prior's Dirichlet-multinomial) the group moves alone give a cell count the
    beta-binomial's mean and second moment within 5 Monte Carlo standard errors (ESS-based; z 0.9 and 0.6).  With
    C(m, d) dropped the second moment is 27 standard errors off (the mean stays right by symmetry)."""
    import arviz as az
    from scipy.stats import betabinom

    from dpposterior.inference.marginals_da import Problem, _run_chain

    n, conc = 300, 2.0
    flat = {"mechanism": "discrete-gaussian", "sigma": 1e5}
    release = load_release(_release([{"clique": ["a", "b"], "value": [[50] * 3] * 2, **flat},
                                     {"clique": ["b", "c"], "value": [[50] * 2] * 3, **flat}], n=n,
                                    domain={"a": 2, "b": 3, "c": 2}))
    prob = Problem(observation_model(release, {"concentration": conc}))
    x = np.stack([_run_chain(prob, conc, 200, 3000, 1, seed, group=3, record_sweep=False)[1][0][:, 0, 0]
                  for seed in range(4)]).astype(float)
    law = betabinom(n, conc / 6, 5 * conc / 6)
    for draws, want in ((x, law.mean()), (x ** 2, law.moment(2))):
        se = draws.std() / math.sqrt(float(az.ess(draws)))
        assert abs(draws.mean() - want) < 5 * se, (draws.mean(), want, se)


def test_da_refuses_options_it_does_not_use_and_infers_n_where_the_release_has_none():
    release = _release([{"clique": ["a"], "value": [1, 2], "mechanism": "discrete-gaussian", "sigma": 1.0}])
    with pytest.raises(InputError, match="grid_size"):
        infer(release, method="da", grid_size=50)
    with pytest.raises(InputError, match="group_moves"):
        infer(release, method="da", group_moves=-1)
    no_n = dict(release)
    del no_n["n"]
    post = infer(no_n, method="da", draws=10, warmup=0, chains=1, seed=0)
    assert post.posterior["n"].shape == (1, 10)  # tests/test_marginals_unknown_n.py checks its law


def test_da_draws_are_reproducible_for_a_seed():
    release = _release([{"clique": ["a", "b"], "value": [[2, 0], [1, 2]], "mechanism": "discrete-gaussian",
                         "sigma": 1.0}])
    one = infer(release, method="da", draws=50, warmup=10, chains=2, seed=3)
    two = infer(release, method="da", draws=50, warmup=10, chains=2, seed=3)
    np.testing.assert_array_equal(one.posterior["p[a,b]"], two.posterior["p[a,b]"])


def test_posterior_file_round_trip_gives_the_same_marginal(tmp_path):
    release = _release([{"clique": ["a", "b"], "value": [[2, 0], [1, 2]], "mechanism": "discrete-gaussian",
                         "sigma": 1.0},
                        {"clique": ["b", "c"], "value": [[1, 2], [0, 3]], "mechanism": "discrete-gaussian",
                         "sigma": 1.0}], labels={"a": ["x", "y"]})
    post = infer(release, method="da", draws=40, warmup=10, chains=2, seed=3)
    path = tmp_path / "p.nc"
    post.to_netcdf(path)
    from dpposterior.posterior import Posterior

    back = Posterior.read(path)
    got = back.marginal("c,a")
    assert list(got.dims) == ["chain", "draw", "c", "a"]
    assert list(got.coords["a"].values) == ["x", "y"]
    np.testing.assert_allclose(got.values, post.marginal(["c", "a"]).values, rtol=1e-6)
    assert json.loads(back.attrs["junction_tree"])["attributes"] == ["a", "b", "c"]
    with pytest.raises(InputError, match="attributes"):
        back.marginal(["a", "zz"])


def test_synthesize_draws_data_sets_from_distinct_posterior_draws():
    from dpposterior.synthetic import synthesize

    release = _release([{"clique": ["a", "b"], "value": [[20, 0], [10, 20]], "mechanism": "discrete-gaussian",
                         "sigma": 1.0}], n=50, labels={"a": ["x", "y"]})
    post = infer(release, method="da", draws=30, warmup=20, chains=2, seed=3)
    sets = synthesize(post, m=4, seed=1)
    assert len(sets) == 4 and all(len(s) == 50 for s in sets)
    assert set(sets[0]["a"]) <= {"x", "y"}
    assert len({s.attrs["posterior_draw"] for s in sets}) == 4
    with pytest.raises(InputError, match="m"):
        synthesize(post, m=1000)
    with pytest.raises(InputError, match="rows"):
        synthesize(post, m=2, rows=0)


def test_integer_noise_law_of_any_registered_kind_is_accepted():
    for name in ("skellam",):
        kind = get_mechanism(name)
        scale, fields = kind.noise_for_budget(math.sqrt(2), rho=0.5)
        rel = load_release(_release([{"clique": ["a"], "value": [2, 3], "mechanism": name, **fields}]))
        assert rel.mechanism(0).integer_valued


# --------------------------------------------------------------------------- simulation-based calibration
def _sbc(trials, seed):
    from dpposterior.diagnostics.calibration import calibrate

    return calibrate("marginals", 40, None, trials, ["da", "naive"], seed=seed, draws=200,
                     mechanism="discrete-gaussian", rho=0.5, scheduler="processes", return_ranks=True)


def _sbc_verdict(res, methods=("da", "naive")):
    """Per method: the smallest rank KS p-value over the 12 cells, and the 90% coverage averaged over the cells
    with its Monte Carlo sd from the spread of the per-trial averages across trials (the cells of one trial are
    dependent; the trials are independent)."""
    out = {}
    for method in methods:
        coords = res["methods"][method]["by_coordinate"]
        pmin = min(c["ks_pvalue"] for c in coords.values())
        u = np.asarray(res["_ranks"][method], float)
        per_trial = ((u >= 0.05) & (u <= 0.95)).mean(axis=1)
        out[method] = (pmin, float(per_trial.mean()), float(per_trial.std(ddof=1) / math.sqrt(len(per_trial))))
    return out


def test_sbc_da_is_calibrated_and_naive_is_not():
    """Reduced SBC (120 trials of n = 40, two discrete-Gaussian two-way marginals, sigma = 2 per cell): da's ranks
    uniform in every cell (Bonferroni over 12) and its 90% coverage within 3 Monte Carlo sd of 0.90; the naive
    posterior's coverage more than 3 sd below."""
    out = _sbc_verdict(_sbc(120, seed=5))
    assert out["da"][0] > 1e-3 / 12, out
    assert abs(out["da"][1] - 0.9) < 3 * out["da"][2], out
    assert out["naive"][1] < 0.9 - 3 * out["naive"][2], out


@pytest.mark.slow
def test_sbc_da_is_calibrated_and_naive_is_not_full():
    out = _sbc_verdict(_sbc(1000, seed=6))
    assert out["da"][0] > 1e-3 / 12, out
    assert abs(out["da"][1] - 0.9) < 3 * out["da"][2], out
    assert out["naive"][1] < 0.9 - 3 * out["naive"][2], out
