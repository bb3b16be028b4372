"""Differential-privacy noise laws as PyMC distributions (docs/ppl.md).

The same laws and names as :mod:`dpposterior.ppl.numpyro`, in PyMC's calling convention: a model variable
``DiscreteGaussian("y", loc, sigma, observed=...)`` inside a ``pm.Model``, an unnamed one with
``DiscreteGaussian.dist(loc, sigma)``.  Each is a ``pm.CustomDist`` whose log-probability is built in
PyTensor from the mechanism's own log-mass (:meth:`dpposterior.ppl.NoiseLaw.log_mass`: closed form with the
exact normaliser for the discrete Gaussian and Laplace, the mechanism's table for other integer laws) and
whose draws come from the mechanisms' own exact samplers on PyMC's numpy generator.

* ``DiscreteGaussian(name, loc, sigma)``, ``DiscreteLaplace(name, loc, scale)``,
  ``Noise(name, law, loc=0, **fields)`` (any registered law by name and its release-record fields, or a
  :class:`~dpposterior.ppl.NoiseLaw`);
* ``NoisyCount(name, count, noise, tail=1e-12)``: ``count`` a PyMC discrete ``.dist`` (``pm.Poisson.dist(mu)``),
  ``noise`` one of the above's ``.dist(0, ...)`` or a NoiseLaw; log P(y*) = logsumexp over the latent counts
  y* - W..y* + W of log P(y) + log P(e = y* - y), W holding all but ``tail`` of the noise (PyMC's own
  ``pm.logp`` of the count gives -inf outside its support);
* ``NoisySum(name, n, mean, sd, noise)``: a clamped sum by its central limit plus Laplace or Gaussian noise,
  convolved in closed form.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from ..errors import InputError
from ..mechanisms.base import NoiseShape
from ..mechanisms.integer import SCHEMA_RECORD_FIELDS
from ..mechanisms.registry import get_mechanism
from ._laws import DEFAULT_TAIL, NoiseLaw, Ops, noisy_sum_log_density, window_entries
from ._release import ReleaseData, ReleasedTable, from_release

__all__ = ["DiscreteGaussian", "DiscreteLaplace", "Noise", "NoisyCount", "NoisySum", "from_release",
           "ReleaseData", "ReleasedTable", "NoiseLaw", "OPS"]

def _log_ndtr(x):
    """log Phi(x), accurate in both tails: erfcx below 0, log1p above (each branch fed only its own side so
    neither overflows into the other's gradient)."""
    neg, pos = pt.minimum(x, 0.0), pt.maximum(x, 0.0)
    lower = pt.log(pt.erfcx(-neg / math.sqrt(2.0))) - 0.5 * neg ** 2 - math.log(2.0)
    upper = pt.log1p(-0.5 * pt.erfc(pos / math.sqrt(2.0)))
    return pt.switch(x < 0, lower, upper)


#: PyTensor's operations for :meth:`NoiseLaw.log_mass` and :func:`noisy_sum_log_density`
OPS = Ops(asarray=pt.as_tensor_variable, where=pt.switch, abs=pt.abs, floor=pt.floor, clip=pt.clip,
          take=lambda table, idx: table[idx], eq=pt.eq, logical_and=pt.and_, sqrt=pt.sqrt, log=pt.log,
          logaddexp=pt.logaddexp, log_ndtr=_log_ndtr)

#: where a variable built here keeps its noise law (``NoisyCount`` and ``NoisySum`` read it back)
_TAG = "dpposterior_noise"


def _broadcast_shape(*arrays) -> tuple[int, ...]:
    return np.broadcast_shapes(*(np.shape(a) for a in arrays))


def _integer_variable(name, loc, law: NoiseLaw, kwargs):
    index = law.index

    def logp(value, loc, index):
        return law.log_mass(value - loc, OPS, index=index)

    def random(loc, index, rng=None, size=None):
        shape = tuple(size) if size is not None else _broadcast_shape(loc, index)
        noise = NoiseLaw(law.mechanisms, np.broadcast_to(index, shape)).draw(rng, shape)
        return (np.asarray(loc) + noise).astype(np.int64)

    args = (loc, index)
    opts = dict(logp=logp, random=random, dtype="int64", **kwargs)
    var = pm.CustomDist.dist(*args, **opts) if name is None else pm.CustomDist(name, *args, **opts)
    setattr(var.tag, _TAG, ("integer", law, loc))
    return var


def _continuous_variable(name, loc, law: NoiseLaw, kwargs):
    kind, scale, _ = law.shaped_form()
    base = pm.Laplace if kind is NoiseShape.LAPLACE else pm.Normal
    var = base.dist(loc, scale, **kwargs) if name is None else base(name, loc, scale, **kwargs)
    setattr(var.tag, _TAG, ("continuous", law, loc))
    return var


class _Law:
    """PyMC's convention: ``Cls(name, *params, **kwargs)`` adds a model variable, ``Cls.dist(*params)`` makes
    an unnamed one."""

    @classmethod
    def _law(cls, *args, **kwargs) -> tuple[object, NoiseLaw]:  # pragma: no cover - abstract
        raise NotImplementedError

    def __new__(cls, name, *args, **kwargs):
        if not isinstance(name, str):
            raise InputError("name", f"a PyMC variable needs a name first (got {type(name).__name__}); "
                             f"{cls.__name__}.dist(...) makes an unnamed one")
        return cls._make(name, *args, **kwargs)

    @classmethod
    def dist(cls, *args, **kwargs):
        return cls._make(None, *args, **kwargs)

    @classmethod
    def _make(cls, name, *args, **kwargs):
        loc, law, rest = cls._law(*args, **kwargs)
        maker = _integer_variable if law.integer_valued else _continuous_variable
        return maker(name, loc, law, rest)


class DiscreteGaussian(_Law):
    """The discrete Gaussian N_Z(loc, sigma^2): P(loc + k) = exp(-k^2 / (2 sigma^2)) / Z(sigma), k integer."""

    @classmethod
    def _law(cls, loc=0, sigma=1.0, **kwargs):
        return loc, NoiseLaw.discrete_gaussian(sigma), kwargs


class DiscreteLaplace(_Law):
    """The discrete Laplace (two-sided geometric): P(loc + k) = exp(-|k| / scale) / Z(scale) (OpenDP's scale)."""

    @classmethod
    def _law(cls, loc=0, scale=1.0, **kwargs):
        return loc, NoiseLaw.discrete_laplace(scale), kwargs


class Noise(_Law):
    """The registered noise law ``law`` (a name, with its release-record fields: ``Noise("e", "skellam", mu=4)``;
    or a :class:`NoiseLaw`) centred at ``loc``.  Continuous laws give PyMC's own Laplace or Normal."""

    @classmethod
    def _law(cls, law, loc=0, **kwargs):
        if isinstance(law, NoiseLaw):
            return loc, law, kwargs
        # the law's own record fields go to the law, the rest (shape, observed, ...) to PyMC
        own = set(getattr(get_mechanism(law, "law"), "record_fields", ())) | set(SCHEMA_RECORD_FIELDS) | {"sensitivity"}
        fields = {k: kwargs.pop(k) for k in list(kwargs) if k in own}
        return loc, NoiseLaw.by_name(law, field="law", **fields), kwargs


def _law_of(noise, integer: bool) -> NoiseLaw:
    if isinstance(noise, NoiseLaw):
        law = noise
    else:
        tagged = getattr(getattr(noise, "tag", None), _TAG, None)
        if tagged is None:
            raise InputError("noise", "must be a noise law from dpposterior.ppl.pymc (DiscreteGaussian.dist(0, "
                             "sigma), DiscreteLaplace.dist(0, scale), Noise.dist(...)) or a NoiseLaw, got "
                             f"{type(noise).__name__}")
        _, law, loc = tagged
        if not np.all(np.asarray(loc) == 0):
            raise InputError("noise", "the noise is centred at 0 (give loc=0)")
    if law.integer_valued != integer:
        raise InputError("noise", f"{law.name} is {'continuous' if law.integer_valued is False else 'integer'} "
                         f"noise: {'NoisyCount takes integer' if integer else 'NoisySum takes continuous'} noise")
    return law


class NoisyCount:
    """y* = y + e: a latent count ``count`` (a PyMC discrete ``.dist``) plus integer ``noise``, the count summed
    out exactly over y* - W..y* + W, W holding all but ``tail`` of the noise."""

    def __new__(cls, name, count, noise, tail: float = DEFAULT_TAIL, **kwargs):
        if not isinstance(name, str):
            raise InputError("name", "a PyMC variable needs a name first; NoisyCount.dist(...) makes an unnamed one")
        return cls._make(name, count, noise, tail, kwargs)

    @classmethod
    def dist(cls, count, noise, tail: float = DEFAULT_TAIL, **kwargs):
        return cls._make(None, count, noise, tail, kwargs)

    @classmethod
    def _make(cls, name, count, noise, tail, kwargs):
        if not isinstance(count, pt.TensorVariable) or count.owner is None:
            raise InputError("count", "must be a PyMC distribution's .dist(...) (pm.Poisson.dist(mu), ...)")
        if not str(count.dtype).startswith(("int", "uint")):
            raise InputError("count", f"must be a discrete distribution (got dtype {count.dtype})")
        law = _law_of(noise, integer=True)
        w = law.window(float(tail))
        j = np.arange(-w, w + 1)

        def logp(value, count, index):
            shape_nd = value.ndim
            jj = pt.as_tensor_variable(j.reshape((-1,) + (1,) * shape_nd))
            latent = value[None] - jj
            return pt.logsumexp(pm.logp(count, latent) + law.log_mass(jj, OPS, index=index), axis=0)

        def random(count, index, rng=None, size=None):
            shape = tuple(size) if size is not None else _broadcast_shape(count, index)
            window_entries(max(1, math.prod(shape)), w)
            noise = NoiseLaw(law.mechanisms, np.broadcast_to(index, shape)).draw(rng, shape)
            return (np.asarray(count) + noise).astype(np.int64)

        static = [s for s in (count.type.shape or ()) ]
        if all(s is not None for s in static):
            window_entries(max(1, math.prod(np.broadcast_shapes(tuple(static), law.shape))), w)
        opts = dict(logp=logp, random=random, dtype="int64", **kwargs)
        args = (count, law.index)
        return pm.CustomDist.dist(*args, **opts) if name is None else pm.CustomDist(name, *args, **opts)


class NoisySum:
    """y* = S + e: S the sum of ``n`` clamped records with mean ``mean`` and sd ``sd`` each, taken as
    N(n mean, n sd^2) by the central limit theorem, plus Laplace or Gaussian ``noise``
    (``Noise.dist("laplace", epsilon=..., sensitivity=...)``, ``Noise.dist("gaussian", sigma=...)`` or a
    continuous NoiseLaw); the convolution is exact."""

    def __new__(cls, name, n, mean, sd, noise, **kwargs):
        if not isinstance(name, str):
            raise InputError("name", "a PyMC variable needs a name first; NoisySum.dist(...) makes an unnamed one")
        return cls._make(name, n, mean, sd, noise, kwargs)

    @classmethod
    def dist(cls, n, mean, sd, noise, **kwargs):
        return cls._make(None, n, mean, sd, noise, kwargs)

    @classmethod
    def _make(cls, name, n, mean, sd, noise, kwargs):
        law = _law_of(noise, integer=False)
        kind, scale, _ = law.shaped_form()

        def logp(value, n, mean, sd):
            return noisy_sum_log_density(value, n, mean, sd, kind, scale, OPS)

        def random(n, mean, sd, rng=None, size=None):
            shape = tuple(size) if size is not None else _broadcast_shape(n, mean, sd, scale)
            s = n * mean + np.sqrt(n) * sd * rng.standard_normal(shape)
            e = rng.laplace(size=shape) if kind is NoiseShape.LAPLACE else rng.standard_normal(shape)
            return s + scale * e

        opts = dict(logp=logp, random=random, dtype="floatX", **kwargs)
        args = (pt.as_tensor_variable(np.asarray(n, float)) if not isinstance(n, pt.TensorVariable) else n, mean, sd)
        return pm.CustomDist.dist(*args, **opts) if name is None else pm.CustomDist(name, *args, **opts)

