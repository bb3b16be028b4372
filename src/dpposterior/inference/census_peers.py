"""The frequentist and naive baselines a census posterior is compared with (families/census_table.py).

Three estimators of the geounit x query cells of a census noisy-measurement release, each returning
arrays indexed like ``structure.units[level]`` x the query's cells, NaN where the method says nothing:

* :func:`gls` -- generalised least squares, the Census Bureau's published baseline (Cumings-Menon,
  "Full-Information Estimation of Linear Queries", the uncertainty evaluation of the 2020 noisy
  measurement files; Hay, Rastogi, Miklau & Suciu, PVLDB 2010, Sec. 4's two-pass estimator on a
  hierarchy).  Every geounit u carries its detailed vector z_u (length C); a parent's is the sum of its
  children's; u's measurements are y_u = A_u z_u + e with e ~ N(0, diag(variance)) (the discrete
  Gaussian treated as Gaussian of the published variance).  The blocks' histograms get a flat prior, so
  the posterior mean and sd of any linear query are its BLUE and that estimator's standard error.
  The estimator is Gaussian belief propagation on the tree (Pearl 1988; Weiss & Freeman 2001 for its
  exactness on trees), in two passes:

  - upward: m_u^up, the law of z_u given the measurements in u's subtree, is the law of the sum of
    the children's (independent) upward laws, conditioned on u's own measurements and invariant;
  - downward: the law of z_c given everything outside c's subtree is the law of z_u - sum of c's
    siblings, with z_u given everything outside u's children's subtrees (u's downward law conditioned
    on u's measurements) and each sibling at its upward law; c's final law is that times c's upward law.

  Each law is a *generalised* Gaussian: a mean m, a covariance V and a flat subspace F (directions the
  measurements so far do not identify: improper, infinite variance), V's range orthogonal to F; the
  directions in neither carry variance zero (exact, from invariants).  Sums add means and covariances
  and take the span of the flat subspaces, projecting the rest off it; conditioning reparametrises
  z = m + T theta over the flat and proper directions (exact ones stay fixed), adds the measurements'
  information on theta, restricts theta to the invariants' affine subspace by a null-space basis
  (equality constraints done exactly, no tiny-variance limit), and takes the pseudo-inverse of the
  information, whose null space is the new flat subspace.  A query cell whose row of the query matrix
  has a component in its geounit's final flat subspace is not estimable from the release (a flat
  prior leaves it improper): its mean and sd are NaN.  Only such cells are NaN -- a block missing rows
  still gets the estimate its parent and siblings identify.  Ranks are numerical: an eigenvalue at or
  below ``RANK_TOL`` times the trace of the matrix it is judged against (the summed covariances for a
  sum, the information before the constraints for the flat subspace, the constraint rows' squared norm
  for the constraints) counts as zero.  Cost O(geounits x C^3), compiled (Hawaii-sized, 14,732 blocks
  x 16 cells, in about 2.5 s; the kernels compile once, about 15 s, and are cached).

  Invariants (``structure.invariants``) are exact totals of z_u: constraints 1'z_u = t_u.  Two that
  contradict each other (a parent's total that is not the sum of its children's exact totals) are
  refused.

* :func:`naive` -- each measured cell alone: its noisy value clipped at 0, and the interval
  noisy +- z sd clipped at 0 (what a reader of the file gets).

* :func:`flat_prior` -- the per-cell posterior of the ``noisyvalue`` package: the true count k >= 0 under
  a flat prior on the non-negative integers and the discrete Gaussian likelihood
  p(k | y) ~ exp(-(y - k)^2 / (2 sigma^2)) (Canonne, Kamath & Steinke 2020, Def. 1), enumerated over
  k in max(y, 0) +- 12 sigma (the mass beyond is below exp(-72)); its median and equal-tailed interval.
  Quantiles of this discrete law are the smallest k whose CDF reaches the level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from scipy import stats

from ..errors import InputError, RefusedError
from ..families.census_table import CensusStructure

#: relative eigenvalue below which a covariance direction is exact, or an information direction flat
RANK_TOL = 1e-10
#: a query cell is not estimable when this share of its row's squared norm lies in the flat subspace
FLAT_TOL = 1e-8
#: the most cells of one enumeration window times rows held at once by :func:`flat_prior`
WINDOW_CELLS = 1 << 24
#: the widest window :func:`flat_prior` accepts (one row alone must fit)
MAX_WINDOW = 1 << 26
#: half-width of the flat-prior enumeration window, in sigmas
WINDOW_SIGMAS = 12.0


# --------------------------------------------------------------------------- generalised Gaussian kernels
# Small dense products as loops and eigh as the only LAPACK call: the kernels then compile in seconds
# (numba's ``@`` and SVD specialise per layout), and C is at most a few dozen.
@numba.njit(cache=True)
def _mm(A, B):
    """A @ B."""
    n, k = A.shape
    p = B.shape[1]
    out = np.zeros((n, p))
    for i in range(n):
        for l in range(k):
            a = A[i, l]
            if a != 0.0:
                for j in range(p):
                    out[i, j] += a * B[l, j]
    return out


@numba.njit(cache=True)
def _mtm(A, B):
    """A' @ B."""
    k, n = A.shape
    p = B.shape[1]
    out = np.zeros((n, p))
    for l in range(k):
        for i in range(n):
            a = A[l, i]
            if a != 0.0:
                for j in range(p):
                    out[i, j] += a * B[l, j]
    return out


@numba.njit(cache=True)
def _mmt(A, B):
    """A @ B'."""
    n, k = A.shape
    p = B.shape[0]
    out = np.zeros((n, p))
    for i in range(n):
        for j in range(p):
            s = 0.0
            for l in range(k):
                s += A[i, l] * B[j, l]
            out[i, j] = s
    return out


@numba.njit(cache=True)
def _mv(A, x):
    """A @ x."""
    n, k = A.shape
    out = np.zeros(n)
    for i in range(n):
        s = 0.0
        for l in range(k):
            s += A[i, l] * x[l]
        out[i] = s
    return out


@numba.njit(cache=True)
def _mtv(A, x):
    """A' @ x."""
    k, n = A.shape
    out = np.zeros(n)
    for l in range(k):
        if x[l] != 0.0:
            for i in range(n):
                out[i] += A[l, i] * x[l]
    return out


@numba.njit(cache=True)
def _sym(A):
    return 0.5 * (A + A.T)


@numba.njit(cache=True)
def _trace(A):
    s = 0.0
    for i in range(A.shape[0]):
        s += A[i, i]
    return s


@numba.njit(cache=True)
def _split(S, thresh):
    """Eigenvectors of symmetric ``S`` with eigenvalue above ``thresh`` (columns), those eigenvalues,
    and the other eigenvectors."""
    n = S.shape[0]
    if n == 0:
        return np.zeros((0, 0)), np.zeros(0), np.zeros((0, 0))
    w, Q = np.linalg.eigh(np.ascontiguousarray(S))
    na = 0
    for i in range(n):
        if w[i] > thresh:
            na += 1
    above = np.empty((n, na))
    lam = np.empty(na)
    below = np.empty((n, n - na))
    ja, jb = 0, 0
    for i in range(n):
        if w[i] > thresh:
            above[:, ja] = Q[:, i]
            lam[ja] = w[i]
            ja += 1
        else:
            below[:, jb] = Q[:, i]
            jb += 1
    return above, lam, below


@numba.njit(cache=True)
def _rank_thresh(S):
    """The eigenvalue of PSD ``S`` at or below which a direction counts as null (relative to its trace)."""
    return max(RANK_TOL * _trace(S), 1e-300)


@numba.njit(cache=True)
def _scaled_outer(B, lam):
    """B diag(1/lam) B'."""
    Bs = B.copy()
    for j in range(lam.shape[0]):
        Bs[:, j] /= lam[j]
    return _mmt(Bs, B)


@numba.njit(cache=True)
def _update(m, V, Pf, J, h, G, t):
    """Condition the generalised Gaussian (m, V, flat projector Pf) on measurements of information
    (J, h) and on the exact constraints G z = t.  Returns (m, V, Pf, status): status 0, or 1 when the
    constraints contradict the law's exact directions."""
    C = m.shape[0]
    F, _, _ = _split(Pf, 0.5)
    E, lam, _ = _split(V, _rank_thresh(V))
    nf, npr = F.shape[1], E.shape[1]
    r = nf + npr
    T = np.empty((C, r))
    T[:, :nf] = F
    T[:, nf:] = E
    # information on theta (z = m + T theta): none on the flat coordinates, 1/lambda on the proper ones
    Jt = _mtm(T, _mm(J, T))
    for i in range(npr):
        Jt[nf + i, nf + i] += 1.0 / lam[i]
    ht = _mtv(T, h - _mv(J, m))
    theta0 = np.zeros(r)
    N = np.eye(r)
    k = G.shape[0]
    if k > 0:
        # theta restricted to {G T theta = t - G m}: theta0 + N phi, theta0 the least-norm solution
        rhs = t - _mv(G, m)
        scale = 1.0
        for i in range(k):
            scale = max(scale, abs(t[i]))
        H = _mm(G, T)
        # H's scale is G's (T is orthonormal): a direction of G lying in the exact subspace leaves a
        # rounding residue in H that is no constraint on theta
        gg = 0.0
        for i in range(k):
            for j in range(C):
                gg += G[i, j] * G[i, j]
        R, s2, N = _split(_mtm(H, H), RANK_TOL * gg)
        if r > 0:
            theta0 = _mv(_scaled_outer(R, s2), _mtv(H, rhs))
        res = _mv(H, theta0) - rhs
        for i in range(k):
            if abs(res[i]) > 1e-6 * scale:
                return m, V, Pf, 1
    Jp = _sym(_mtm(N, _mm(Jt, N)))
    hp = _mtv(N, ht - _mv(Jt, theta0))
    TN = _mm(T, N)
    # null relative to the information before the constraints (Jp may be all rounding)
    Wp, wp, Wf = _split(Jp, _rank_thresh(Jt))
    Jinv = _scaled_outer(Wp, wp)
    m_new = m + _mv(T, theta0) + _mv(TN, _mv(Jinv, hp))
    V_new = _sym(_mmt(_mm(TN, Jinv), TN))
    Fl = _mm(TN, Wf)
    return m_new, V_new, _sym(_mmt(Fl, Fl)), 0


@numba.njit(cache=True)
def _finish_sum(Sm, SV, SPf, scale):
    """The law of a sum from the summed means, covariances and flat projectors: flat on the span of the
    flat subspaces, the rest projected off it.  Covariance eigenvalues at the rounding level of
    ``scale`` (the trace of the largest covariance summed) are exact directions and set to 0."""
    C = Sm.shape[0]
    F, _, _ = _split(_sym(SPf), 1e-6)
    Pf = _mmt(F, F)
    P = np.eye(C) - Pf
    E, lam, _ = _split(_sym(_mm(_mm(P, SV), P)), max(RANK_TOL * scale, 1e-300))
    for j in range(lam.shape[0]):
        lam[j] = 1.0 / lam[j]
    return _mv(P, Sm), _sym(_scaled_outer(E, lam)), Pf


@numba.njit(cache=True)
def _product(mA, VA, PfA, mB, VB, PfB):
    """The product of two generalised Gaussians: A conditioned on B's proper directions as measurements
    and on B's exact directions as constraints."""
    C = mA.shape[0]
    E, lam, _ = _split(VB, _rank_thresh(VB))
    J = _scaled_outer(E, lam)
    h = _mv(J, mB)
    X, _, _ = _split(_sym(np.eye(C) - PfB - _mmt(E, E)), 0.5)
    G = np.ascontiguousarray(X.T)
    return _update(mA, VA, PfA, J, h, G, _mv(G, mB))


@numba.njit(cache=True)
def _two_pass(Jm, hm, inv_t, has_inv, child_ptr, child_idx, order_up, roots):
    """Both passes over the geounit tree (global unit indices; ``order_up`` children before parents).
    Returns the final (m, V, Pf) per unit and (status, unit) -- status 1: contradicting invariants."""
    n, C = hm.shape
    up_m = np.zeros((n, C))
    up_V = np.zeros((n, C, C))
    up_P = np.zeros((n, C, C))
    ones = np.ones((1, C))
    none = np.zeros((0, C))
    eye = np.eye(C)
    for g in order_up:
        Sm = np.zeros(C)
        SV = np.zeros((C, C))
        if child_ptr[g] == child_ptr[g + 1]:
            m, V, P = Sm, SV, eye.copy()
        else:
            SP = np.zeros((C, C))
            for j in range(child_ptr[g], child_ptr[g + 1]):
                c = child_idx[j]
                Sm += up_m[c]
                SV += up_V[c]
                SP += up_P[c]
            m, V, P = _finish_sum(Sm, SV, SP, _trace(SV))
        G = ones if has_inv[g] else none
        m, V, P, status = _update(m, V, P, Jm[g], hm[g], G, inv_t[g:g + 1] if has_inv[g] else np.zeros(0))
        if status:
            return up_m, up_V, up_P, status, g
        up_m[g], up_V[g], up_P[g] = m, V, P
    fin_m = np.zeros((n, C))
    fin_V = np.zeros((n, C, C))
    fin_P = np.zeros((n, C, C))
    dn_m = np.zeros((n, C))
    dn_V = np.zeros((n, C, C))
    dn_P = np.zeros((n, C, C))
    for g in roots:
        dn_P[g] = eye
    for k in range(order_up.shape[0] - 1, -1, -1):
        g = order_up[k]
        m, V, P, status = _product(dn_m[g], dn_V[g], dn_P[g], up_m[g], up_V[g], up_P[g])
        if status:
            return fin_m, fin_V, fin_P, status, g
        fin_m[g], fin_V[g], fin_P[g] = m, V, P
        if child_ptr[g] == child_ptr[g + 1]:
            continue
        # z_g given everything outside its children's subtrees; then z_c = z_g - sum of c's siblings
        G = ones if has_inv[g] else none
        om, oV, oP, status = _update(dn_m[g], dn_V[g], dn_P[g], Jm[g], hm[g], G,
                                     inv_t[g:g + 1] if has_inv[g] else np.zeros(0))
        if status:
            return fin_m, fin_V, fin_P, status, g
        Sm, SV, SP = om.copy(), oV.copy(), oP.copy()
        for j in range(child_ptr[g], child_ptr[g + 1]):
            c = child_idx[j]
            Sm -= up_m[c]
            SV += up_V[c]
            SP += up_P[c]
        for j in range(child_ptr[g], child_ptr[g + 1]):
            c = child_idx[j]
            dn_m[c], dn_V[c], dn_P[c] = _finish_sum(Sm + up_m[c], SV - up_V[c], SP - up_P[c], _trace(SV))
    return fin_m, fin_V, fin_P, 0, -1


@numba.njit(cache=True)
def _information(gunit, query, cell, noisy, variance, query_cell, n_units):
    """Each geounit's measurement information: J = sum a a' / var, h = sum a y / var over its rows, a the
    indicator of the histogram cells in the row's query cell."""
    C = query_cell.shape[1]
    J = np.zeros((n_units, C, C))
    h = np.zeros((n_units, C))
    for i in range(gunit.shape[0]):
        g, q, k = gunit[i], query[i], cell[i]
        w = 1.0 / variance[i]
        for a in range(C):
            if query_cell[q, a] != k:
                continue
            h[g, a] += w * noisy[i]
            for b in range(C):
                if query_cell[q, b] == k:
                    J[g, a, b] += w
    return J, h


# --------------------------------------------------------------------------- GLS
def _query_matrix(structure: CensusStructure, qi: int) -> np.ndarray:
    K = int(structure.query_sizes[qi])
    return (structure.query_cell[qi][None, :] == np.arange(K)[:, None]).astype(float)


@dataclass
class GLSResult:
    """The GLS estimate of every geounit's detailed vector: ``mean[l]`` (U, C), ``cov[l]`` (U, C, C) and
    ``flat[l]`` (U, C, C), the projector on the directions the release does not identify (module
    docstring)."""

    structure: CensusStructure
    mean: list[np.ndarray]
    cov: list[np.ndarray]
    flat: list[np.ndarray]

    def estimate(self, level: str, query: str) -> tuple[np.ndarray, np.ndarray]:
        """The BLUE of every cell of ``query`` at every geounit of ``level`` and its standard error:
        (mean, sd), each (units, query cells); NaN at cells the release does not identify."""
        li = self.structure.level_index(level)
        qi = self.structure.query_index(query)
        R = _query_matrix(self.structure, qi)
        mean = self.mean[li] @ R.T
        var = np.einsum("kc,ucd,kd->uk", R, self.cov[li], R)
        # a variance at the covariance's rounding level is an exact direction's (an invariant): its sd
        # is 0, not the square root of the rounding
        scale = np.einsum("ucc->u", self.cov[li])[:, None] * R.sum(axis=1)[None, :]
        var[var <= RANK_TOL * scale] = 0.0
        sd = np.sqrt(var)
        flat = np.einsum("kc,ucd,kd->uk", R, self.flat[li], R)
        unidentified = flat > FLAT_TOL * R.sum(axis=1)[None, :]
        mean[unidentified] = np.nan
        sd[unidentified] = np.nan
        return mean, sd

    def interval(self, level: str, query: str, coverage: float = 0.90) -> tuple[np.ndarray, np.ndarray]:
        """The Gaussian interval mean -+ z sd of :meth:`estimate` (lower, upper)."""
        z = _z(coverage)
        mean, sd = self.estimate(level, query)
        return mean - z * sd, mean + z * sd


def gls_memory(units: int, cells: int, histogram: int) -> float:
    """Bytes of :func:`gls` at its peak: every geounit's information, upward, downward and final laws (a C x C
    covariance and flat projector each: 7 (units, C, C) arrays, C the allowed cells), and, with structural
    zeros, the final laws again on the histogram's ``histogram`` cells."""
    out = 8.0 * units * (7.0 * cells * cells + 5.0 * cells)
    if cells < histogram:
        out += 8.0 * units * (2.0 * histogram * histogram + histogram)
    return out


def check_gls_memory(units: int, cells: int, histogram: int) -> None:
    """Refuse, before the information arrays are allocated, a GLS that would not fit in memory."""
    from ..memory import check_fits

    check_fits(gls_memory(units, cells, histogram), "structure",
               f"gls: {units:,} geounits x {cells:,} x {cells:,} covariances", "fewer geounits, or a histogram of "
               "fewer cells (structural zeros drop cells), or a machine with more memory")


def gls(structure: CensusStructure) -> GLSResult:
    """Generalised least squares of every geounit's detailed vector from all noisy measurements and the
    invariants (module docstring)."""
    if not isinstance(structure, CensusStructure):
        raise InputError("structure", f"must be a CensusStructure (got {type(structure).__name__})")
    L = structure.L
    # a structural zero is a known 0, not an unknown: the detailed vectors run over the allowed cells only
    allowed = structure.allowed_cells
    C = int(allowed.size)
    sizes = np.array([len(u) for u in structure.units], dtype=np.int64)
    offset = np.concatenate([[0], np.cumsum(sizes)])
    n = int(offset[-1])
    # parent of each unit at level l >= 1, from any of its blocks
    parent = np.full(n, -1, dtype=np.int64)
    for li in range(1, L):
        p = np.empty(sizes[li], dtype=np.int64)
        p[structure.block_unit[li]] = structure.block_unit[li - 1]
        parent[offset[li]:offset[li + 1]] = p + offset[li - 1]
    kids = np.flatnonzero(parent >= 0)
    child_idx = kids[np.argsort(parent[kids], kind="stable")].astype(np.int64)
    counts = np.bincount(parent[kids], minlength=n)
    child_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    order_up = np.arange(n - 1, -1, -1, dtype=np.int64)  # levels bottom first: children before parents
    roots = np.arange(offset[1], dtype=np.int64)
    inv_t = np.zeros(n)
    has_inv = np.zeros(n, dtype=np.bool_)
    for lv, (idx, tot) in structure.invariants.items():
        g = offset[structure.level_index(lv, "invariants")] + np.asarray(idx, dtype=np.int64)
        has_inv[g] = True
        inv_t[g] = np.asarray(tot, dtype=float)
    check_gls_memory(n, C, int(structure.C))
    gunit = (offset[structure.level] + structure.unit).astype(np.int64)
    J, h = _information(gunit, structure.query.astype(np.int64), structure.cell.astype(np.int64),
                        structure.noisy.astype(float), structure.variance.astype(float),
                        np.ascontiguousarray(structure.query_cell[:, allowed]).astype(np.int64), n)
    m, V, P, status, g = _two_pass(J, h, inv_t, has_inv, child_ptr, child_idx, order_up, roots)
    if status:
        li = int(np.searchsorted(offset, g, side="right") - 1)
        code = structure.units[li][g - offset[li]]
        raise RefusedError("invariants", f"the exact totals contradict each other at {structure.levels[li]} "
                           f"{code or '(all)'}: a total is not the sum of its parts' exact totals")
    if C < structure.C:  # back to the histogram's cells: 0, with no variance and no flat direction, at the zeros
        full = structure.C
        mf = np.zeros((n, full))
        Vf = np.zeros((n, full, full))
        Pf = np.zeros((n, full, full))
        mf[:, allowed] = m
        Vf[:, allowed[:, None], allowed[None, :]] = V
        Pf[:, allowed[:, None], allowed[None, :]] = P
        m, V, P = mf, Vf, Pf
    cut = [slice(offset[li], offset[li + 1]) for li in range(L)]
    return GLSResult(structure, [m[s] for s in cut], [V[s] for s in cut], [P[s] for s in cut])


def gls_interval(result: GLSResult, level: str, query: str, coverage: float = 0.90):
    """``result.interval(level, query, coverage)``: the GLS Gaussian interval (lower, upper)."""
    if not isinstance(result, GLSResult):
        raise InputError("result", f"must be a GLSResult from gls() (got {type(result).__name__})")
    return result.interval(level, query, coverage)


# --------------------------------------------------------------------------- per-cell baselines
def _z(coverage) -> float:
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float)) or not 0.0 < coverage < 1.0:
        raise InputError("coverage", f"must be a number in (0, 1) (got {coverage!r})")
    return float(stats.norm.ppf(0.5 + coverage / 2.0))


def _cells(structure: CensusStructure, level: str, query: str):
    if not isinstance(structure, CensusStructure):
        raise InputError("structure", f"must be a CensusStructure (got {type(structure).__name__})")
    li = structure.level_index(level)
    qi = structure.query_index(query)
    rows, units, cells = structure.measured(li, qi)
    shape = (len(structure.units[li]), int(structure.query_sizes[qi]))
    return rows, units, cells, shape


def naive(structure: CensusStructure, level: str, query: str, coverage: float = 0.90):
    """Each measured cell of ``query`` at ``level`` read alone: (point, lower, upper), each (units, query
    cells): the noisy value clipped at 0 and noisy -+ z sd clipped at 0; NaN where not measured; 0 at a cell made
    only of structural zeros (known to be 0)."""
    z = _z(coverage)
    rows, units, cells, shape = _cells(structure, level, query)
    point, lower, upper = (np.full(shape, np.nan) for _ in range(3))
    y = structure.noisy[rows].astype(float)
    sd = np.sqrt(structure.variance[rows])
    point[units, cells] = np.maximum(y, 0.0)
    lower[units, cells] = np.maximum(y - z * sd, 0.0)
    upper[units, cells] = np.maximum(y + z * sd, 0.0)
    _known_zero(structure, query, units, cells, point, lower, upper)
    return point, lower, upper


def _known_zero(structure: CensusStructure, query: str, units, cells, *arrays) -> None:
    """Set the measured cells made only of structural zeros to 0 in each of ``arrays``."""
    zero = structure.zero_query_cells(query)[cells]
    for a in arrays:
        a[units[zero], cells[zero]] = 0.0


def flat_prior(structure: CensusStructure, level: str, query: str, coverage: float = 0.90):
    """The flat-prior posterior of each measured cell's true count k >= 0 under the discrete Gaussian
    likelihood (module docstring): (median, lower, upper) of its equal-tailed ``coverage`` interval, each
    (units, query cells); NaN where not measured; 0 at a cell made only of structural zeros."""
    _z(coverage)
    rows, units, cells, shape = _cells(structure, level, query)
    median, lower, upper = (np.full(shape, np.nan) for _ in range(3))
    if rows.size == 0:
        return median, lower, upper
    y = structure.noisy[rows].astype(np.int64)
    sigma = structure.sigma[rows].astype(float)
    half = np.ceil(WINDOW_SIGMAS * sigma).astype(np.int64)
    width = int(2 * half.max() + 1)
    if width > MAX_WINDOW:
        raise InputError("measurements.variance", f"a sigma of {sigma.max():.4g} needs an enumeration window of "
                         f"{width} counts, more than the {MAX_WINDOW} held in memory")
    centre = np.maximum(y, 0)
    start = np.maximum(centre - half, 0)
    probs = np.array([(1.0 - coverage) / 2.0, 0.5, (1.0 + coverage) / 2.0])
    out = np.empty((rows.size, 3))
    step = max(1, WINDOW_CELLS // width)
    offsets = np.arange(width)
    for a in range(0, rows.size, step):
        b = min(rows.size, a + step)
        k = start[a:b, None] + offsets[None, :]
        inside = k <= (centre[a:b] + half[a:b])[:, None]
        d = (y[a:b, None] - k).astype(float)
        logw = np.where(inside, -d * d / (2.0 * sigma[a:b, None] ** 2), -np.inf)
        w = np.exp(logw - logw.max(axis=1, keepdims=True))
        cdf = np.cumsum(w, axis=1)
        cdf /= cdf[:, -1:]
        for j, p in enumerate(probs):
            # the smallest k whose CDF reaches p (a small slack for the cumulative sum's rounding)
            out[a:b, j] = start[a:b] + np.argmax(cdf >= p - 1e-12, axis=1)
    lower[units, cells] = out[:, 0]
    median[units, cells] = out[:, 1]
    upper[units, cells] = out[:, 2]
    _known_zero(structure, query, units, cells, median, lower, upper)
    return median, lower, upper


__all__ = ["GLSResult", "gls", "gls_interval", "naive", "flat_prior"]
