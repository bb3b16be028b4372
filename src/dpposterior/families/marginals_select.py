"""Private selection of the two-way cliques of a ``marginals`` release, MST-style.

McKenna, Miklau & Sheldon (2021), "Winning the NIST Contest: A scalable and general approach to differentially
private synthetic data", J. Privacy and Confidentiality 11(3), Sec. 4 (MST): measure every one-way marginal,
then choose r - 1 pairs of attributes forming a spanning tree of the r attributes, greedily (Kruskal) by how
badly the independence estimate built from the noisy one-ways fits each pair, with one exponential mechanism
per edge; the chosen pairs' two-way tables are then measured.  This module is the selection step only
(docs/marginals.md): pure functions over numpy arrays, no file or family plumbing.

Neighbouring data sets differ by **replacing one record** (n is the same and public).  For the pair (i, j) the
score is

    u_ij(D) = || x_ij(D) - e_ij ||_1,    e_ij = n p_i p_j^T,

with x_ij the true two-way table (counts) and p_i the noisy one-way of attribute i clipped at 0 and normalised
to sum 1 (uniform where nothing is left).  e_ij is a function of released one-ways and the public n only, so
it is the same on both neighbours; replacing one record moves one unit of x_ij from one cell to another (or
leaves it), ||x_ij(D) - x_ij(D')||_1 <= 2, and by the triangle inequality |u_ij(D) - u_ij(D')| <= 2.  The bound
is attained (``SCORE_SENSITIVITY``; tests/test_marginals_select.py finds it by brute force), and different
pairs' scores can move in opposite directions, so the score vector is not monotone.

Each round draws the index of one candidate (a pair joining two components of the forest so far) with
probability proportional to exp(u / s), scale s = 2 Delta / eps: the exponential mechanism with
sensitivity Delta, which is eps-DP and eps-bounded-range, hence eps^2/8-zCDP (Cesar & Rogers 2021,
"Bounding, concentrating, and truncating: unifying privacy loss composition for data analytics", Lemma 3.2
with Durfee & Rogers 2019).  The rounds compose adaptively: rho = rounds * eps^2 / 8.  For publication the draw
is OpenDP's ``make_noisy_max`` under ``zero_concentrated_divergence`` (exact: Gumbel-max carried out on the
scores as exact rationals, no floating-point noise), whose own privacy map states each round's rho;
``publication=False`` draws the same law with numpy's Gumbel-max (seeded, reproducible, not for
publication).

A cap on the size of the chosen tables (``max_cells``): only pairs whose two-way table has at most that many cells
are candidates, as AIM bounds the size of the model it may select (McKenna, Mullins, Sheldon & Miklau 2022, "AIM:
An Adaptive and Iterative Mechanism for Differentially Private Synthetic Data", PVLDB 15(11), Sec. 4, the
model-size filter of its candidates).  The candidate set then depends on the public domain sizes and the public
cap alone -- the same on both neighbours -- so each round is the same exponential mechanism over fewer candidates
and the privacy analysis above is unchanged.  The cap must leave the attributes connected (a spanning tree of
allowed pairs must exist); the smallest cap that does is the largest table of a minimum bottleneck spanning tree
over the table sizes (:func:`smallest_connecting_cap`), which the refusal names.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError, require

#: replace-one L-infinity sensitivity of the MST score vector (derivation above; attained)
SCORE_SENSITIVITY = 2.0
#: the fields of a selection's record in a release file, in order
RECORD_FIELDS = ("method", "rounds", "epsilon_per_round", "sensitivity", "rho", "sampler")
#: fields a selection's record may add: the public cap on the chosen tables' cells (absent: no cap)
OPTIONAL_RECORD_FIELDS = ("max_cells",)
NUMPY_SAMPLER = "numpy-gumbel (not for publication)"
_UNIT_ROUNDOFF = 2.0 ** -53


@dataclass(frozen=True)
class Selection:
    """The chosen cliques and what choosing them cost.

    ``epsilon_per_round``: each round's exponential mechanism is this-bounded-range (and this-DP);
    ``rho`` = ``rounds * epsilon_per_round**2 / 8`` (zCDP), never more than the ``rho_select`` asked for.
    ``sensitivity``: the replace-one sensitivity of the scores (:data:`SCORE_SENSITIVITY`).  ``scale``: the
    scale s of exp(u / s) used in every round; it is 2 (sensitivity + float_margin) / epsilon_per_round, where
    ``float_margin`` bounds how far the floating-point scores can stray from exact arithmetic (the scale covers
    the rounding too; below 1e-6 of the sensitivity unless n times the largest two-way table exceeds ~10^9).
    ``opendp_rho_per_round``: OpenDP's own privacy map of one round (publication draws only; at most
    ``epsilon_per_round**2 / 8``)."""

    cliques: list
    rounds: int
    epsilon_per_round: float
    rho: float
    sensitivity: float
    sampler: str
    scale: float = field(default=float("nan"), compare=False)
    float_margin: float = field(default=0.0, compare=False)
    opendp_rho_per_round: float | None = field(default=None, compare=False)
    max_cells: int | None = None

    def to_record(self) -> dict:
        """The JSON-ready record of the selection for the release file."""
        out = {"method": "mst", "rounds": int(self.rounds), "epsilon_per_round": float(self.epsilon_per_round),
               "sensitivity": float(self.sensitivity), "rho": float(self.rho), "sampler": str(self.sampler)}
        if self.max_cells is not None:
            out["max_cells"] = int(self.max_cells)
        return out

    @classmethod
    def check_record(cls, d, field: str = "selection") -> dict:
        """Validate a selection record (``to_record``'s form); returns it normalised.  A bad field raises
        ``InputError("selection.FIELD", reason)``; a stated rho below ``rounds * epsilon_per_round**2 / 8``
        is refused."""
        require(isinstance(d, dict), field, f"must be a table with {', '.join(RECORD_FIELDS)}")
        known = RECORD_FIELDS + OPTIONAL_RECORD_FIELDS
        for key in d:
            require(key in known, f"{field}.{key}", f"unknown field (expected {', '.join(known)})")
        for key in RECORD_FIELDS:
            require(key in d, f"{field}.{key}", "is missing")
        require(d["method"] == "mst", f"{field}.method", f"must be 'mst', got {d['method']!r}")
        rounds = d["rounds"]
        require(isinstance(rounds, (int, np.integer)) and not isinstance(rounds, bool) and rounds >= 1,
                f"{field}.rounds", f"must be an integer >= 1, got {rounds!r}")
        out = {"method": "mst", "rounds": int(rounds)}
        for key in ("epsilon_per_round", "sensitivity", "rho"):
            v = d[key]
            ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            require(ok and math.isfinite(float(v)) and float(v) > 0, f"{field}.{key}",
                    f"must be a finite number > 0, got {v!r}")
            out[key] = float(v)
        require(isinstance(d["sampler"], str) and d["sampler"].strip() != "", f"{field}.sampler",
                "must name the sampler that drew the selection")
        out["sampler"] = d["sampler"]
        if "max_cells" in d:
            out["max_cells"] = _check_cap(d["max_cells"], f"{field}.max_cells")
        floor = out["rounds"] * out["epsilon_per_round"] ** 2 / 8.0
        require(out["rho"] >= floor * (1 - 1e-12), f"{field}.rho",
                f"{out['rho']!r} is below rounds * epsilon_per_round^2 / 8 = {floor!r}")
        return out

    @classmethod
    def privacy_rho(cls, d, field: str = "selection") -> float:
        """The zCDP cost of a recorded selection: ``rounds * epsilon_per_round**2 / 8``, or the stated rho
        where that is larger (a stated rho below it is refused by :meth:`check_record`)."""
        rec = cls.check_record(d, field)
        return max(rec["rho"], rec["rounds"] * rec["epsilon_per_round"] ** 2 / 8.0)


# --------------------------------------------------------------------------------------------- inputs


def _check_inputs(records, domain, one_way, rho_select):
    require(isinstance(domain, dict), "domain", "must be a dict attribute -> number of categories")
    attrs = list(domain)
    require(len(attrs) >= 2, "domain", f"needs at least 2 attributes to select pairs, got {len(attrs)}")
    sizes = []
    for a in attrs:
        size = domain[a]
        require(isinstance(size, (int, np.integer)) and not isinstance(size, bool) and size >= 1,
                f"domain.{a}", f"must be an integer >= 1, got {size!r}")
        sizes.append(int(size))
    ok = isinstance(rho_select, (int, float, np.integer, np.floating)) and not isinstance(rho_select, bool)
    require(ok and math.isfinite(float(rho_select)) and float(rho_select) > 0, "rho_select",
            f"must be a finite number > 0, got {rho_select!r}")
    try:
        x = np.asarray(records)
    except Exception as exc:  # ragged lists
        raise InputError("records", f"must be an integer array (n, k): {exc}") from None
    require(x.ndim == 2, "records", f"must be a 2-d array (n, k), got shape {x.shape}")
    require(x.shape[1] == len(attrs), "records",
            f"has {x.shape[1]} columns but the domain names {len(attrs)} attributes")
    require(x.shape[0] >= 1, "records", "is empty")
    if x.dtype.kind == "f":
        require(bool(np.all(np.isfinite(x))) and bool(np.all(x == np.round(x))), "records",
                "must hold integer codes")
        x = x.astype(np.int64)
    require(x.dtype.kind in "iu", "records", f"must hold integer codes, got dtype {x.dtype}")
    x = x.astype(np.int64, copy=False)
    for c, (a, size) in enumerate(zip(attrs, sizes)):
        col = x[:, c]
        lo, hi = int(col.min()), int(col.max())
        require(lo >= 0 and hi < size, f"records.{a}", f"codes must lie in 0..{size - 1}, found {lo if lo < 0 else hi}")
    require(isinstance(one_way, dict), "one_way", "must be a dict attribute -> noisy one-way count vector")
    for key in one_way:
        require(key in domain, f"one_way.{key}", "is not an attribute of the domain")
    probs = []
    for a, size in zip(attrs, sizes):
        require(a in one_way, f"one_way.{a}", "is missing (every attribute's noisy one-way is needed)")
        try:
            v = np.asarray(one_way[a], dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"one_way.{a}", "must be a vector of numbers") from None
        require(v.shape == (size,), f"one_way.{a}", f"must have {size} entries (the domain), got shape {v.shape}")
        require(bool(np.all(np.isfinite(v))), f"one_way.{a}", "must be finite")
        v = np.clip(v, 0.0, None)
        total = float(v.sum())
        probs.append(v / total if total > 0 else np.full(size, 1.0 / size))
    return attrs, sizes, x, probs


def _check_cap(max_cells, name: str = "max_cells") -> int:
    ok = isinstance(max_cells, (int, np.integer)) and not isinstance(max_cells, bool)
    require(ok and max_cells >= 1, name, f"must be an integer >= 1 (cells of a two-way table), got {max_cells!r}")
    return int(max_cells)


def check_cap(max_cells, sizes) -> int:
    """``max_cells`` as an int, refused (field ``max_cells``) unless it is a count >= 1 under which the pairs of
    attributes of ``sizes`` (their numbers of levels) still connect every attribute."""
    max_cells = _check_cap(max_cells)
    need = smallest_connecting_cap(sizes)
    require(max_cells >= need, "max_cells", f"{max_cells} leaves the attributes unconnected: no spanning tree of "
            f"pairs of at most {max_cells} cells; the smallest cap that connects them is {need}")
    return max_cells


def smallest_connecting_cap(sizes) -> int:
    """The smallest ``max_cells`` under which the allowed pairs connect every attribute: the largest table of a
    minimum bottleneck spanning tree (Kruskal on the table sizes |dom a| |dom b|), public by construction."""
    k = len(sizes)
    pairs = sorted(itertools.combinations(range(k), 2), key=lambda p: sizes[p[0]] * sizes[p[1]])
    forest = _Components(k)
    cap, joined = 1, 0
    for a, b in pairs:
        if joined == k - 1:
            break
        if forest.root(a) != forest.root(b):
            forest.join(a, b)
            joined += 1
            cap = sizes[a] * sizes[b]
    return cap


class _Components:
    """Union-find over k attributes (path halving): which pairs would join two components of a forest."""

    def __init__(self, k: int):
        self.parent = list(range(k))

    def root(self, a: int) -> int:
        parent = self.parent
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def join(self, a: int, b: int) -> None:
        self.parent[self.root(a)] = self.root(b)


# --------------------------------------------------------------------------------------------- scores


def _scores(x, sizes, probs):
    """Scores of every pair (itertools.combinations order) and a bound on their floating-point error."""
    n = x.shape[0]
    scores, margin = [], 0.0
    for i, j in itertools.combinations(range(len(sizes)), 2):
        table = np.bincount(x[:, i] * sizes[j] + x[:, j], minlength=sizes[i] * sizes[j]).astype(float)
        est = (n * np.outer(probs[i], probs[j])).ravel()
        scores.append(float(np.abs(table - est).sum()))
        # |fl(u) - u| <= (m + 1) u_roundoff sum|x - e|  (one rounding per subtraction, m - 1 additions of
        # nonnegative terms in any order), sum|x - e| <= n + sum(e); e and n are public, so is the bound
        m = table.size
        margin = max(margin, 1.0001 * (m + 1) * _UNIT_ROUNDOFF * (n + float(est.sum())))
    return np.asarray(scores), margin


def mst_scores(records, domain, one_way) -> dict:
    """``{(a, b): score}`` for every pair of attributes (module docstring): the L1 distance between the true
    two-way table of (a, b) and ``n p_a p_b^T`` from the clipped, normalised noisy one-ways."""
    attrs, sizes, x, probs = _check_inputs(records, domain, one_way, 1.0)
    scores, _ = _scores(x, sizes, probs)
    return {pair: float(s) for pair, s in zip(itertools.combinations(attrs, 2), scores)}


def round_probabilities(scores, scale) -> np.ndarray:
    """Exact law of one round's draw: softmax(scores / scale)."""
    z = np.asarray(scores, dtype=float) / float(scale)
    w = np.exp(z - z.max())
    return w / w.sum()


# --------------------------------------------------------------------------------------------- budget


def _round_budget(rho_select: float, rounds: int) -> float:
    """The largest float eps with rounds * eps**2 / 8 <= rho_select."""
    eps = math.sqrt(8.0 * rho_select / rounds)
    while rounds * eps ** 2 / 8.0 > rho_select:
        eps = math.nextafter(eps, 0.0)
    return eps


def _opendp_space():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp, (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float, monotonic=False))


def opendp_round_rho(scale: float, d_in: float) -> float:
    """OpenDP's privacy map (zCDP rho) of ``make_noisy_max`` at ``scale`` for scores of L-infinity
    sensitivity ``d_in`` (not monotone): OpenDP states (2 d_in / scale)^2 / 8, rounded up."""
    dp, space = _opendp_space()
    return float(dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=float(scale)).map(float(d_in)))


def _scale_for(eps: float, d_in: float, publication: bool) -> tuple[float, float | None]:
    """The smallest float scale s >= 2 d_in / eps whose BR parameter 2 d_in / s is at most eps, and, for
    publication, whose OpenDP privacy map is at most eps^2 / 8 (OpenDP rounds up by a few ulps)."""
    scale = 2.0 * d_in / eps
    for _ in range(256):
        od = opendp_round_rho(scale, d_in) if publication else None
        if 2.0 * d_in / scale <= eps and (od is None or od <= eps ** 2 / 8.0):
            return scale, od
        scale = math.nextafter(scale, math.inf)
    raise RuntimeError(f"OpenDP's privacy map of make_noisy_max ({od!r}) is not (2 d_in / scale)^2 / 8 "
                       f"= {eps ** 2 / 8.0!r}: the installed OpenDP changed")


# --------------------------------------------------------------------------------------------- selection


def _kruskal(k: int, scores: np.ndarray, draw, allowed=None) -> list[tuple[int, int]]:
    """r - 1 rounds; each draws (``draw(candidate_scores) -> index``) one pair joining two components, among the
    pairs ``allowed`` (a boolean per pair in itertools.combinations order; None: every pair)."""
    pairs = list(itertools.combinations(range(k), 2))
    if allowed is None:
        allowed = [True] * len(pairs)
    forest = _Components(k)
    chosen = []
    for _ in range(k - 1):
        cand = [p for p, (a, b) in enumerate(pairs) if allowed[p] and forest.root(a) != forest.root(b)]
        idx = int(draw(scores[cand]))
        if not 0 <= idx < len(cand):  # pragma: no cover - a sampler's contract
            raise RuntimeError(f"selection sampler returned index {idx} of {len(cand)} candidates")
        a, b = pairs[cand[idx]]
        forest.join(a, b)
        chosen.append((a, b))
    return chosen


def select_mst(records, domain, *, rho_select, one_way, rng=None, publication: bool = True,
               max_cells: int | None = None) -> Selection:
    """Choose r - 1 pairs of attributes (a spanning tree) MST-style at zCDP cost at most ``rho_select``.

    ``records``: int array (n, k) of codes, column c an attribute of ``domain`` (dict attr -> size, in column
    order).  ``one_way``: attr -> the noisy one-way count vector already released (used for free, post-
    processing).  ``publication=True`` (default) draws each round with OpenDP's exact ``make_noisy_max``;
    ``publication=False`` with numpy's Gumbel-max from ``rng`` (a Generator or a seed; not for publication).
    ``max_cells``: only pairs whose two-way table has at most this many cells are candidates (None: every pair);
    a cap that leaves the attributes unconnected is refused, naming the smallest that connects them.
    Replace-one neighbours; see the module docstring and docs/marginals.md.
    """
    attrs, sizes, x, probs = _check_inputs(records, domain, one_way, rho_select)
    allowed = None
    if max_cells is not None:
        max_cells = check_cap(max_cells, sizes)
        allowed = [sizes[a] * sizes[b] <= max_cells for a, b in itertools.combinations(range(len(sizes)), 2)]
    rounds = len(attrs) - 1
    eps = _round_budget(float(rho_select), rounds)
    scores, margin = _scores(x, sizes, probs)
    d_in = SCORE_SENSITIVITY + 2.0 * margin
    # 2 d_in / scale <= eps and (publication) OpenDP's map <= eps^2 / 8: eps is what both statements are within
    scale, od_rho = _scale_for(eps, d_in, publication)

    if publication:
        from ..mechanisms.base import opendp_sampler_name

        dp, space = _opendp_space()
        meas = dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=scale)
        sampler = f"{opendp_sampler_name()} make_noisy_max (zCDP, exact Gumbel-max)"

        def draw(s):
            return meas([float(v) for v in s])
    else:
        from ..mechanisms.base import as_rng

        gen = as_rng(rng)
        sampler = NUMPY_SAMPLER

        def draw(s):
            return int(np.argmax(s / scale + gen.gumbel(size=s.shape)))

    edges = _kruskal(len(attrs), scores, draw, allowed)
    return Selection(cliques=[(attrs[a], attrs[b]) for a, b in edges], rounds=rounds, epsilon_per_round=eps,
                     rho=rounds * eps ** 2 / 8.0, sensitivity=SCORE_SENSITIVITY, sampler=sampler,
                     scale=scale, float_margin=margin, opendp_rho_per_round=od_rho, max_cells=max_cells)
