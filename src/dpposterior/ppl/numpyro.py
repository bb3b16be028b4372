"""Differential-privacy noise laws as NumPyro distributions (docs/ppl.md).

* :class:`DiscreteGaussian` (Canonne, Kamath & Steinke, NeurIPS 2020, eq. 1), :class:`DiscreteLaplace`
  (the two-sided geometric of Ghosh, Roughgarden & Sundararajan 2012) and :func:`Noise` (any registered law
  by name): integer-support distributions whose log-mass is the mechanism's own, normaliser included, and
  whose draws are inverse-CDF draws from the mechanism's own CDF table in JAX's random stream (simulation
  and prediction; publication noise comes from OpenDP).
* :class:`NoisyCount`: y* = y + e for a latent count y ~ ``count`` (any NumPyro discrete distribution) and
  integer noise e, with log P(y*) = logsumexp over y* - W <= y <= y* + W of log P(y) + log P(e = y* - y),
  W the window holding all but ``tail`` of the noise (the terms left out sum to at most ``tail``): the
  latent-count sum of Kazan & Reiter's data augmentation done exactly and differentiably.
* :class:`NoisySum`: a clamped sum S of n records by its central limit, N(n m, n s^2), plus Gaussian noise
  (N(n m, n s^2 + sigma^2)) or Laplace noise (the exponentially modified Gaussian on both sides, in closed
  form through ``log_ndtr``).

Batch shapes broadcast as in NumPyro; the noise parameters are published numbers (concrete, not traced).
"""

from __future__ import annotations

import math
import sys


def _bind_submodules(*packages: str) -> None:
    """Bind every loaded submodule of ``packages`` on its parent module where the binding is missing.

    ArviZ 1 (arviz_base) registers jax and numpyro as lazily loaded modules (lazy_loader); a package realised
    by importing one of its submodules first (``import numpyro.distributions``) is left without the bindings
    of submodules it had already imported, and NumPyro's own ``numpyro.factor`` then fails on
    ``numpyro.distributions.distribution``.  Realising the package first and restoring the bindings of anything
    imported the other way makes the order of imports irrelevant."""
    for name in sorted(m for m in list(sys.modules) if m.startswith(tuple(p + "." for p in packages))):
        parent, _, child = name.rpartition(".")
        module, owner = sys.modules.get(name), sys.modules.get(parent)
        if module is not None and owner is not None and not hasattr(owner, child):
            setattr(owner, child, module)


import jax  # noqa: E402
import numpyro  # noqa: E402

numpyro.__version__  # realise a lazily registered package before its submodules are imported

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.scipy.special import log_ndtr, logsumexp  # noqa: E402
from numpyro.distributions import Distribution, constraints  # noqa: E402
from numpyro.distributions import Laplace as _Laplace  # noqa: E402
from numpyro.distributions import Normal as _Normal  # noqa: E402
from numpyro.distributions.util import promote_shapes, validate_sample  # noqa: E402

from ..errors import InputError  # noqa: E402
from ..mechanisms.base import NoiseShape  # noqa: E402
from ._laws import DEFAULT_TAIL, NoiseLaw, Ops, noisy_sum_log_density, window_entries  # noqa: E402
from ._release import ReleaseData, ReleasedTable, from_release  # noqa: E402

_bind_submodules("jax", "numpyro")

__all__ = ["DiscreteGaussian", "DiscreteLaplace", "Noise", "NoisyCount", "NoisySum", "from_release",
           "ReleaseData", "ReleasedTable", "NoiseLaw", "OPS"]

#: jax.numpy's operations for :meth:`NoiseLaw.log_mass`
OPS = Ops(asarray=jnp.asarray, where=jnp.where, abs=jnp.abs, floor=jnp.floor, clip=jnp.clip, take=jnp.take,
          eq=jnp.equal, logical_and=jnp.logical_and, sqrt=jnp.sqrt, log=jnp.log, logaddexp=jnp.logaddexp,
          log_ndtr=log_ndtr)


class _Integers(constraints.ParameterFreeConstraint):
    """Every integer (NumPyro has the non-negative and bounded ones only): the support of noisy counts."""

    is_discrete = True

    def __call__(self, x):
        x = jnp.asarray(x)
        return jnp.floor(x) == x

    def feasible_like(self, prototype):
        return jnp.zeros_like(prototype)


#: the support of an integer noise law and of a noisy count
integers = _Integers()


class IntegerNoise(Distribution):
    """loc + e, e from a :class:`~dpposterior.ppl.NoiseLaw` on the integers (every cell its own law)."""

    arg_constraints = {"loc": constraints.real}
    support = integers
    pytree_data_fields = ("loc",)
    pytree_aux_fields = ("law",)

    def __init__(self, loc, law: NoiseLaw, *, validate_args=None):
        if not isinstance(law, NoiseLaw) or not law.integer_valued:
            raise InputError("noise", "an integer-noise distribution takes an integer noise law")
        try:  # whether this can be a noisy count's noise: a centre known to be 0 (not a traced value)
            self.centred = bool(np.all(np.asarray(loc) == 0))
        except Exception:
            self.centred = False
        loc = jnp.asarray(loc)
        batch_shape = jnp.broadcast_shapes(jnp.shape(loc), law.shape)
        self.loc = jnp.broadcast_to(loc, batch_shape)
        self.law = law.broadcast_to(batch_shape)
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    @validate_sample
    def log_prob(self, value):
        return self.law.log_mass(jnp.asarray(value) - self.loc, OPS)

    def sample(self, key, sample_shape=()):
        shape = tuple(sample_shape) + self.batch_shape
        return self.loc + draw_integer_noise(self.law, key, shape).astype(jnp.result_type(self.loc, jnp.int32))

    @property
    def mean(self):
        return self.loc

    @property
    def variance(self):
        return jnp.asarray(self.law.variance)

    def tree_flatten(self):  # the law is static: its numbers are published constants
        return (self.loc,), self.law

    @classmethod
    def tree_unflatten(cls, aux, params):
        out = cls.__new__(cls)
        IntegerNoise.__init__(out, params[0], aux)
        return out


def draw_integer_noise(law: NoiseLaw, key, shape):
    """Inverse-CDF draws of every cell's noise (``shape`` ends in the law's shape) from one uniform per cell."""
    w, cdf = law.cdf_table()
    u = jax.random.uniform(key, shape, dtype=jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)
    index = jnp.broadcast_to(jnp.asarray(law.index), shape)
    out = jnp.zeros(shape, jnp.int32)
    for i in range(cdf.shape[0]):  # one searchsorted per distinct law (a handful for per-cell scales)
        k = jnp.searchsorted(jnp.asarray(cdf[i]), u, side="left") - w
        out = jnp.where(index == i, k, out)
    return out


class DiscreteGaussian(IntegerNoise):
    """The discrete Gaussian N_Z(loc, sigma^2): P(loc + k) = exp(-k^2 / (2 sigma^2)) / Z(sigma), k integer."""

    def __init__(self, loc=0, sigma=1.0, *, validate_args=None):
        super().__init__(loc, NoiseLaw.discrete_gaussian(sigma), validate_args=validate_args)


class DiscreteLaplace(IntegerNoise):
    """The discrete Laplace (two-sided geometric): P(loc + k) = exp(-|k| / scale) / Z(scale) (OpenDP's scale)."""

    def __init__(self, loc=0, scale=1.0, *, validate_args=None):
        super().__init__(loc, NoiseLaw.discrete_laplace(scale), validate_args=validate_args)


def Noise(name, loc=0, *, validate_args=None, **fields):
    """The registered noise law ``name`` with its release-record fields (``Noise("skellam", mu=4.0)``,
    ``Noise("discrete-gaussian", sigma=3)``, ``Noise("laplace", epsilon=1, sensitivity=2)``), centred at ``loc``;
    or a :class:`NoiseLaw` (``from_release(...)["counts"].noise``) given as ``name``."""
    law = name if isinstance(name, NoiseLaw) else NoiseLaw.by_name(name, **fields)
    if law.integer_valued:
        return IntegerNoise(loc, law, validate_args=validate_args)
    kind, scale, _ = law.shaped_form()
    base = _Laplace if kind is NoiseShape.LAPLACE else _Normal
    return base(loc, jnp.asarray(scale), validate_args=validate_args)


def integer_law(noise, field: str = "noise") -> NoiseLaw:
    """The law of ``noise``: a :class:`NoiseLaw` or one of this module's distributions centred at 0."""
    if isinstance(noise, NoiseLaw):
        law = noise
    elif isinstance(noise, IntegerNoise):
        if not noise.centred:
            raise InputError(field, "the noise of a noisy count is centred at 0 (give loc=0)")
        law = noise.law
    elif isinstance(noise, (_Laplace, _Normal)):
        raise InputError(field, f"{type(noise).__name__} is continuous: a noisy count takes integer noise (NoisySum "
                         "takes continuous noise)")
    else:
        raise InputError(field, f"must be an integer noise law (DiscreteGaussian(0, sigma), DiscreteLaplace(0, "
                         f"scale), Noise(...), a NoiseLaw), got {type(noise).__name__}")
    if not law.integer_valued:
        raise InputError(field, f"{law.name} is continuous: a noisy count takes integer noise (NoisySum takes "
                         "continuous noise)")
    return law


class NoisyCount(Distribution):
    """y* = y + e: a latent count ``count`` (a NumPyro discrete distribution) plus integer ``noise``, the count
    summed out exactly over y* - W..y* + W, W holding all but ``tail`` of the noise."""

    arg_constraints = {}
    support = integers
    pytree_data_fields = ("count",)
    pytree_aux_fields = ("law", "tail")

    def __init__(self, count, noise, tail: float = DEFAULT_TAIL, *, validate_args=None):
        if not isinstance(count, Distribution) or not count.support.is_discrete:
            raise InputError("count", f"must be a NumPyro discrete distribution (Poisson, Binomial, ...), got "
                             f"{type(count).__name__}")
        if count.event_shape != ():
            raise InputError("count", f"must be a scalar count per cell (event shape (), got {count.event_shape})")
        law = integer_law(noise)
        batch_shape = jnp.broadcast_shapes(count.batch_shape, law.shape)
        self.count, self.law, self.tail = count, law.broadcast_to(batch_shape), float(tail)
        self.W = self.law.window(self.tail)
        window_entries(max(1, math.prod(batch_shape)), self.W)
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    @validate_sample
    def log_prob(self, value):
        value = jnp.asarray(value)
        shape = jnp.broadcast_shapes(jnp.shape(value), self.batch_shape)
        window_entries(max(1, math.prod(shape)), self.W)
        j = jnp.arange(-self.W, self.W + 1).reshape((-1,) + (1,) * len(shape))  # noise e = y* - y
        latent = value - j  # (2W + 1, *shape): the latent counts y in the window
        inside = self.count.support(latent)
        safe = jnp.where(inside, latent, self.count.support.feasible_like(latent))
        log_count = jnp.where(inside, self.count.log_prob(safe), -jnp.inf)
        return logsumexp(log_count + self.law.log_mass(j, OPS), axis=0)

    def sample(self, key, sample_shape=()):
        k1, k2 = jax.random.split(key)
        y = self.count.sample(k1, sample_shape)
        shape = tuple(sample_shape) + self.batch_shape
        return jnp.broadcast_to(y, shape) + draw_integer_noise(self.law, k2, shape).astype(y.dtype)

    @property
    def mean(self):
        return jnp.broadcast_to(self.count.mean, self.batch_shape)

    @property
    def variance(self):
        return self.count.variance + jnp.asarray(self.law.variance)

    def tree_flatten(self):
        return (self.count,), (self.law, self.tail)

    @classmethod
    def tree_unflatten(cls, aux, params):
        return cls(params[0], aux[0], aux[1])


class NoisySum(Distribution):
    """y* = S + e: S the sum of ``n`` clamped records with mean ``mean`` and sd ``sd`` each (their clamped
    values), taken as N(n mean, n sd^2) by the central limit theorem, plus Laplace or Gaussian ``noise``
    (``Noise("laplace", epsilon=..., sensitivity=...)``, ``Noise("gaussian", sigma=...)`` or a continuous
    :class:`NoiseLaw`).  The convolution is exact; the CLT is the approximation (docs/ppl.md says when it
    fails)."""

    arg_constraints = {"n": constraints.positive, "mean": constraints.real, "sd": constraints.positive}
    support = constraints.real
    pytree_data_fields = ("n", "mean_", "sd")
    pytree_aux_fields = ("kind", "scale")

    def __init__(self, n, mean, sd, noise, *, validate_args=None):
        if isinstance(noise, (_Laplace, _Normal)):
            if not np.all(np.asarray(noise.loc) == 0):
                raise InputError("noise", "the noise of a noisy sum is centred at 0 (give loc=0)")
            self.kind = NoiseShape.LAPLACE if isinstance(noise, _Laplace) else NoiseShape.GAUSSIAN
            self.scale = np.asarray(noise.scale)
        elif isinstance(noise, NoiseLaw):
            if noise.integer_valued:
                raise InputError("noise", f"{noise.name} is integer noise: a noisy sum takes continuous noise")
            self.kind, scale, _ = noise.shaped_form()
            self.scale = np.asarray(scale)
        else:
            raise InputError("noise", f"must be Laplace or Gaussian noise (Noise('laplace', ...), Noise('gaussian', "
                             f"...)), got {type(noise).__name__}")
        self.n, self.mean_, self.sd = promote_shapes(jnp.asarray(n, float), jnp.asarray(mean), jnp.asarray(sd))
        batch_shape = jnp.broadcast_shapes(jnp.shape(self.n), jnp.shape(self.mean_), jnp.shape(self.sd),
                                           np.shape(self.scale))
        super().__init__(batch_shape=batch_shape, validate_args=validate_args)

    def log_prob(self, value):
        return noisy_sum_log_density(jnp.asarray(value), self.n, self.mean_, self.sd, self.kind,
                                     jnp.asarray(self.scale), OPS)

    def sample(self, key, sample_shape=()):
        k1, k2 = jax.random.split(key)
        shape = tuple(sample_shape) + self.batch_shape
        s = self.n * self.mean_ + jnp.sqrt(self.n) * self.sd * jax.random.normal(k1, shape)
        e = jax.random.laplace(k2, shape) if self.kind is NoiseShape.LAPLACE else jax.random.normal(k2, shape)
        return s + jnp.asarray(self.scale) * e

    @property
    def mean(self):
        return jnp.broadcast_to(self.n * self.mean_, self.batch_shape)

    @property
    def variance(self):
        extra = 2 * self.scale ** 2 if self.kind is NoiseShape.LAPLACE else self.scale ** 2
        return jnp.broadcast_to(self.n * self.sd ** 2 + extra, self.batch_shape)

    def tree_flatten(self):
        return (self.n, self.mean_, self.sd), (self.kind, self.scale)

    @classmethod
    def tree_unflatten(cls, aux, params):
        out = cls.__new__(cls)
        out.kind, out.scale = aux
        out.n, out.mean_, out.sd = params
        Distribution.__init__(out, batch_shape=jnp.broadcast_shapes(*(jnp.shape(p) for p in params),
                                                                      np.shape(out.scale)))
        return out

