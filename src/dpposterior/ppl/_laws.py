"""A release's noise law as one object the probabilistic programming languages can read.

A :class:`NoiseLaw` is a field of additive noise laws over a batch of released cells: the distinct
mechanisms (``dpposterior.mechanisms``: the same classes, normalisers and exact samplers the engines and the
curator use) and, for every cell, the index of its law.  The backends (``ppl.numpyro``, ``ppl.pymc``) turn
it into log-mass expressions in their own array language through :meth:`NoiseLaw.log_mass`:

* a law whose log-mass is Laplace- or Gaussian-shaped (``Mechanism.log_mass_shape``: the discrete Laplace,
  the discrete Gaussian) in closed form, -|k|/b - log Z or -k^2/(2 sigma^2) - log Z, with the mechanism's own
  normaliser log Z (Canonne, Kamath & Steinke 2020, eq. 1 for the discrete Gaussian; the discrete Laplace's
  (1 + q)/(1 - q), q = exp(-1/b)) -- exact at every integer;
* any other registered integer law (the Skellam, a third party's) by a table of its ``logpmf`` over the
  window that holds all but :data:`TABLE_TAIL` of its mass; beyond it the mass is below 1e-250 and the
  log-mass is -inf.

Nothing here imports a probabilistic programming language: a backend passes its operations (:class:`Ops`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import InputError
from ..mechanisms.base import Mechanism, NoiseShape

#: the tail mass a latent count's window leaves out by default (``NoisyCount``): the omitted terms of
#: P(y*) = sum_y P(y) P(noise = y* - y) add up to at most this much
DEFAULT_TAIL = 1e-12
#: the mass outside a tabulated law's window (its log-mass there is -inf)
TABLE_TAIL = 1e-250
#: the largest window table or window sum a backend builds (float64 entries: 2 GiB); beyond it one line refuses
MAX_ENTRIES = 2 ** 28


@dataclass(frozen=True)
class Ops:
    """The array operations a backend lends :meth:`NoiseLaw.log_mass` (``jax.numpy``, ``pytensor.tensor``)."""

    asarray: Callable[[Any], Any]
    where: Callable[[Any, Any, Any], Any]
    abs: Callable[[Any], Any]
    floor: Callable[[Any], Any]
    clip: Callable[[Any, Any, Any], Any]
    take: Callable[[Any, Any], Any]  # take(table_1d, integer_index_array)
    eq: Callable[[Any, Any], Any]  # elementwise == (PyTensor's == is identity)
    logical_and: Callable[[Any, Any], Any]
    sqrt: Callable[[Any], Any]
    log: Callable[[Any], Any]
    logaddexp: Callable[[Any, Any], Any]
    log_ndtr: Callable[[Any], Any]  # log Phi, accurate in both tails


class NoiseLaw:
    """Additive noise over a batch of cells: ``mechanisms[index[cell]]`` is each cell's law.

    Build one with :meth:`of` (one mechanism, every cell), :meth:`build` (a mechanism class and broadcast
    parameter arrays) or from a release (:func:`dpposterior.ppl.from_release`)."""

    def __init__(self, mechanisms, index=None):
        mechanisms = tuple(mechanisms)
        if not mechanisms or not all(isinstance(m, Mechanism) for m in mechanisms):
            raise InputError("noise", "a noise law needs at least one dpposterior mechanism")
        if not all(getattr(m, "additive_symmetric", False) for m in mechanisms):
            raise InputError("noise", "only additive, symmetric noise laws (Laplace, Gaussian, the integer laws) "
                             f"have a law of y* - y: got {', '.join(sorted({m.name for m in mechanisms}))}")
        kinds = {bool(m.integer_valued) for m in mechanisms}
        if len(kinds) > 1:
            raise InputError("noise", "a noise law is either on the integers or continuous, not both")
        self.mechanisms = mechanisms
        self.index = np.zeros((), np.int64) if index is None else np.asarray(index, np.int64)
        if self.index.size and (self.index.min() < 0 or self.index.max() >= len(mechanisms)):
            raise InputError("noise", "a cell's law index is outside the list of laws")
        self.integer_valued = kinds.pop()
        self._tables: dict[str, tuple[int, np.ndarray]] = {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def of(cls, mechanism: Mechanism) -> "NoiseLaw":
        return cls((mechanism,))

    @classmethod
    def build(cls, factory: Callable[..., Mechanism], field: str = "noise", **params) -> "NoiseLaw":
        """One mechanism ``factory(**combo)`` per distinct combination of the broadcast ``params`` (concrete
        numbers or arrays: a published noise parameter is public and fixed), each cell indexed to its own."""
        arrays = {}
        for key, value in params.items():
            try:
                arrays[key] = np.asarray(value, float)
            except Exception as exc:  # a traced or symbolic array: the noise parameters must be known numbers
                raise InputError(key, f"must be a known number or array (a published noise parameter), got "
                                 f"{type(value).__name__} ({type(exc).__name__})") from None
            bad = ~np.isfinite(arrays[key])
            if bad.any():
                raise InputError(key, f"must be finite, got {arrays[key][bad].ravel()[0]}")
        try:
            shape = np.broadcast_shapes(*(a.shape for a in arrays.values()))
        except ValueError:
            raise InputError(field, "the noise parameters' shapes do not broadcast: "
                             + ", ".join(f"{k} {a.shape}" for k, a in arrays.items())) from None
        keys = list(arrays)
        stacked = np.stack([np.broadcast_to(arrays[k], shape).ravel() for k in keys], axis=-1)
        distinct, inverse = np.unique(stacked, axis=0, return_inverse=True)
        mechanisms = []
        for row in distinct:
            kwargs = {k: float(v) for k, v in zip(keys, row)}
            try:
                mechanisms.append(factory(**kwargs))
            except (ValueError, TypeError) as exc:
                text = str(exc)
                raise InputError(field, text if text else type(exc).__name__) from None
        return cls(mechanisms, inverse.reshape(shape))

    @classmethod
    def discrete_gaussian(cls, sigma) -> "NoiseLaw":
        """N_Z(0, sigma^2) per cell (``sigma`` a number or an array)."""
        from ..mechanisms.discrete_gaussian import DiscreteGaussian

        return cls.build(lambda sigma: DiscreteGaussian(sigma), field="sigma", sigma=sigma)

    @classmethod
    def discrete_laplace(cls, scale) -> "NoiseLaw":
        """The discrete Laplace of OpenDP's ``scale`` per cell: P(k) proportional to exp(-|k| / scale)."""
        from ..mechanisms.discrete_laplace import DiscreteLaplace

        return cls.build(lambda scale: DiscreteLaplace.with_scale(scale), field="scale", scale=scale)

    @classmethod
    def by_name(cls, name, field: str = "name", **fields) -> "NoiseLaw":
        """The registered mechanism ``name`` built from its release-record ``fields`` (numbers or arrays)."""
        from ..mechanisms.registry import get_mechanism

        kind = get_mechanism(name, field)
        return cls.build(lambda **kw: kind(**kw), field=field, **fields)

    # ------------------------------------------------------------------ shape
    @property
    def shape(self) -> tuple[int, ...]:
        return self.index.shape

    def broadcast_to(self, shape) -> "NoiseLaw":
        try:
            index = np.broadcast_to(self.index, tuple(shape))
        except ValueError:
            raise InputError("noise", f"a noise law of shape {self.shape} does not broadcast to "
                             f"{tuple(shape)}") from None
        out = NoiseLaw(self.mechanisms, np.array(index))  # ascontiguousarray would make a 0-d index 1-d
        out._tables = self._tables
        return out

    def __getitem__(self, key) -> "NoiseLaw":
        out = NoiseLaw(self.mechanisms, np.asarray(self.index[key]))
        out._tables = self._tables
        return out

    @property
    def name(self) -> str:
        return ", ".join(sorted({m.name for m in self.mechanisms}))

    def __repr__(self) -> str:
        return f"NoiseLaw({self.name}, {len(self.mechanisms)} distinct, shape {self.shape})"

    # ------------------------------------------------------------------ numbers
    def per_cell(self, values) -> np.ndarray:
        """A per-law number spread to every cell (shape :attr:`shape`)."""
        return np.asarray(values, float)[self.index]

    @property
    def variance(self) -> np.ndarray:
        return self.per_cell([m.noise_variance for m in self.mechanisms])

    def window(self, tail: float = DEFAULT_TAIL) -> int:
        """The smallest W with P(|noise| > W) <= ``tail`` for every cell's law (integer laws)."""
        self._need_integer("window")
        if not (0.0 < tail < 1.0):
            raise InputError("tail", f"must be in (0, 1), got {tail}")
        return max(int(m.tail_window(tail)) for m in self.mechanisms)

    def _law_form(self):
        """(NoiseShape, scale, log-normaliser) of each distinct law when all share one Laplace- or Gaussian-shaped
        log-mass (or log-density); None otherwise."""
        shapes = [m.log_mass_shape() for m in self.mechanisms]
        if any(s is None for s in shapes) or len({s[0] for s in shapes}) != 1:
            return None
        kind = shapes[0][0]
        scale = np.array([float(s[1]) for s in shapes])
        if self.integer_valued:
            log_norm = np.array([float(m.log_norm) for m in self.mechanisms])
        elif kind is NoiseShape.LAPLACE:
            log_norm = np.log(2.0 * scale)
        else:
            log_norm = np.log(scale) + 0.5 * math.log(2.0 * math.pi)
        return kind, scale, log_norm

    def closed_form(self):
        """(NoiseShape, per-cell scale, per-cell log-normaliser) when every law has the same Laplace- or
        Gaussian-shaped log-mass (or log-density); None otherwise."""
        form = self._law_form()
        if form is None:
            return None
        kind, scale, log_norm = form
        return kind, self.per_cell(scale), self.per_cell(log_norm)

    def shaped_form(self):
        """:meth:`closed_form`, or a one-line error for a law that is neither Laplace- nor Gaussian-shaped."""
        form = self.closed_form()
        if form is None:
            raise InputError("noise", f"{self.name} is neither Laplace- nor Gaussian-shaped")
        return form

    def table(self):
        """(W, log-mass table (laws, 2W + 1) over k = -W..W) of the integer laws, W holding all but
        :data:`TABLE_TAIL`."""
        self._need_integer("table")
        if "log" not in self._tables:
            w = max(int(m.tail_window(TABLE_TAIL)) for m in self.mechanisms)
            if len(self.mechanisms) * (2 * w + 1) > MAX_ENTRIES:
                raise InputError("noise", f"{len(self.mechanisms)} laws tabulated over a window of {2 * w + 1} "
                                 f"integers is more than {MAX_ENTRIES} entries")
            k = np.arange(-w, w + 1, dtype=float)
            self._tables["log"] = (w, np.stack([np.asarray(m.logpmf(k), float) for m in self.mechanisms]))
        return self._tables["log"]

    def cdf_table(self):
        """(W, CDF table (laws, 2W + 1) over k = -W..W) for inverse-CDF draws in a backend's own random stream
        (simulation and prediction; publication noise comes from OpenDP)."""
        self._need_integer("cdf_table")
        if "cdf" not in self._tables:
            tables = [m._table() for m in self.mechanisms]
            w = max(t[0] for t in tables)
            out = np.ones((len(tables), 2 * w + 1))
            for i, (wi, cdf) in enumerate(tables):
                out[i, :w - wi] = 0.0
                out[i, w - wi:w + wi + 1] = cdf
            self._tables["cdf"] = (w, out)
        return self._tables["cdf"]

    # ------------------------------------------------------------------ log-mass in numpy and in a backend
    def numpy_log_mass(self, k) -> np.ndarray:
        """log P(noise = k) (log-density for a continuous law) per cell, by the mechanisms themselves: the
        reference the backends are tested against."""
        k = np.asarray(k, float)
        shape = np.broadcast_shapes(k.shape, self.shape)
        k, index = np.broadcast_to(k, shape), np.broadcast_to(self.index, shape)
        out = np.empty(shape)
        for i, m in enumerate(self.mechanisms):
            sel = index == i
            out[sel] = m.logpdf(k[sel], 0.0)
        return out

    def log_mass(self, k, ops: Ops, index=None):
        """log P(noise = k) per cell as a backend expression; ``k`` broadcasts with :attr:`shape` (a leading
        window axis is fine).  ``index``: the per-cell law index as a backend array (default: this law's)."""
        index = ops.asarray(self.index) if index is None else index
        form = self._law_form()
        if form is not None:
            kind, scale, log_norm = form
            scale, log_norm = ops.take(ops.asarray(scale), index), ops.take(ops.asarray(log_norm), index)
            body = -ops.abs(k) / scale if kind is NoiseShape.LAPLACE else -0.5 * (k / scale) ** 2
            out = body - log_norm
            if self.integer_valued:
                out = ops.where(ops.eq(ops.floor(k), k), out, -np.inf)
            return out
        w, table = self.table()
        flat = ops.asarray(table.ravel())
        kk = ops.clip(ops.floor(k), -w, w)
        pos = index * (2 * w + 1) + (kk + w).astype("int64")
        out = ops.take(flat, pos)
        return ops.where(ops.logical_and(ops.eq(ops.floor(k), k), ops.abs(k) <= w), out, -np.inf)

    # ------------------------------------------------------------------ exact numpy draws
    def draw(self, rng: np.random.Generator, shape=None) -> np.ndarray:
        """Noise for every cell (``shape``: leading sample axes + :attr:`shape`), from each mechanism's own
        sampler (exact for the integer laws) on ``rng``."""
        shape = self.shape if shape is None else tuple(shape)
        index = np.broadcast_to(self.index, shape)
        out = np.empty(shape, np.int64 if self.integer_valued else float)
        for i, m in enumerate(self.mechanisms):
            sel = index == i
            n = int(sel.sum())
            if n:
                out[sel] = m.sample(np.zeros(n), rng)
        return out

    def _need_integer(self, what: str) -> None:
        if not self.integer_valued:
            raise InputError("noise", f"{what} is for integer noise; {self.name} is continuous")


def window_entries(cells: int, w: int, field: str = "tail") -> None:
    """Refuse a window sum of ``cells`` x (2w + 1) terms above :data:`MAX_ENTRIES` before it is built."""
    entries = int(cells) * (2 * int(w) + 1)
    if entries > MAX_ENTRIES:
        raise InputError(field, f"summing the latent count over {2 * w + 1} values for each of {cells} cells is "
                         f"{entries:,} terms ({entries * 8 / 2 ** 30:.1f} GiB), above {MAX_ENTRIES:,}: raise the "
                         "tail mass or split the cells")


def noisy_sum_log_density(value, n, mean, sd, kind: NoiseShape, b, ops: Ops):
    """log density of y* = S + e, S ~ N(n mean, n sd^2) (a clamped sum by its central limit), e Gaussian of sd ``b``
    (then N(n mean, n sd^2 + b^2)) or Laplace of scale ``b``, the Gaussian convolved with the Laplace in closed form:
    (1 / (4b)) [e^{s^2/(2b^2) - z/b} erfc((s/b - z/s)/sqrt2) + e^{s^2/(2b^2) + z/b} erfc((s/b + z/s)/sqrt2)],
    s = sqrt(n) sd, z = y* - n mean, with erfc(x / sqrt2) = 2 Phi(-x) taken as log Phi (stable in both tails)."""
    z = value - n * mean
    s = ops.sqrt(n) * sd
    if kind is NoiseShape.GAUSSIAN:
        total = ops.sqrt(s ** 2 + b ** 2)
        return -0.5 * (z / total) ** 2 - ops.log(total) - 0.5 * math.log(2 * math.pi)
    half = s ** 2 / (2 * b ** 2)
    left = half - z / b + ops.log_ndtr(z / s - s / b)
    right = half + z / b + ops.log_ndtr(-z / s - s / b)
    return ops.logaddexp(left, right) - ops.log(2 * b)
