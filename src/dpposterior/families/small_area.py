"""Family ``small-area``: a table of counts over many areas, released with (integer) noise.

The releases people analyse: for every area g (county, tract, ...) and every cell c of a query
(age group, sex, ...), a noisy count y*_gc = y_gc + e_gc -- the 2020 US Census noisy measurements
(discrete Gaussian noise of published variance), OpenDP/Tumult tables -- optionally with exact
invariants (area totals) and the post-processing that makes counts non-negative.  Kenny et al.
(Science Advances 2024) found such measurements "too noisy to be directly useful without measurement
error modeling"; this family is that model (docs/small-area.md):

    y_gc ~ Poisson(E_g lambda_gc),   log lambda_gc = alpha_c + u_g (+ v_parent(g)),
    u_g ~ N(0, tau^2),  v_p ~ N(0, tau_parent^2),  alpha_c ~ N(0, 10^2),  tau, tau_parent ~ half-N(0, 1),

with E_g the public exposure (population at risk; 1 when not given; it may also be given per area and
cell, E_gc, e.g. births in each period).  Sensitivity (replace-one):
one person moves between two cells of the table (possibly in two areas), so the table changes by
-1 in one cell and +1 in another: L1 = 2, L2 = sqrt(2); with per-cell sigma the zCDP cost is the
worst pair, rho = (1/sigma_a^2 + 1/sigma_b^2)/2 over the two smallest sigmas.  Invariants are
published exactly (as the Census's are); the privacy statement covers the noisy table given them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, WrapValidator, field_serializer, model_validator

from . import EngineSpec, Family, prior_moments
from ..errors import InputError, shown
from ..observation import (ENUMERATE, SIMULATE, LatentStatistic, Measurement, ObservationModel, Prior, TableLaws,
                           Variable)
from ..mechanisms.base import NoiseShape
from ..mechanisms.registry import get_mechanism, is_integer_noise
from ..release import (FORMAT, INCONSISTENCY_SCALES, NumberTable, ReleaseBase, check_epsilon_range, plain_number_rows,
                       table_array)
from ._curate import curator, curator_options

#: the mechanisms a small-area table may state
SMALL_AREA_MECHANISMS = ("discrete-gaussian", "discrete-laplace", "gaussian", "laplace")


def accepts_mechanism(name) -> bool:
    """The four built-in tables' mechanisms, or any registered integer, additive, symmetric noise law (the
    engine tabulates its mass function)."""
    return name in SMALL_AREA_MECHANISMS or is_integer_noise(name)
POSTPROCESSING = ("none", "nonnegative")
#: the largest |count| a table may hold: float64 and int64 represent every integer up to 2^53 exactly
MAX_COUNT = 2.0 ** 53
#: the smallest exposure: rates up to 2^53 / 1e-30 ~ 1e46 keep the rate draws and their moments (the summary
#: squares them, its Monte Carlo errors take fourth powers) finite; at 1e-300 the summary's sd was inf
MIN_EXPOSURE = 1e-30


class CountTable(BaseModel):
    """The noisy G x C table and its mechanism (sigma may be one number, one per cell, or G x C; a registered
    integer law's own fields, ``record_fields``, hold one value for every cell)."""

    model_config = ConfigDict(extra="allow")

    #: validated with numpy when it is a plain table (:func:`_table`), else element by element by pydantic
    value: Annotated[list[list[float]], WrapValidator(lambda v, handler, info: _table(v, handler, info.context))]
    mechanism: str
    sigma: float | list[float] | list[list[float]] | None = None
    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    sensitivity: float | None = None
    sampler: str | None = None
    note: str | None = None

    @field_serializer("value")
    def _floats(self, v):  # the floats pydantic's list[list[float]] held, whatever the rows keep
        return table_array(v).tolist()


def _table(v, handler, context=None) -> NumberTable:
    """The released table: a plain table of numbers is checked in numpy (one pass in C: 10^7 cells in 0.4 s, not
    1.5 s of float objects); anything else goes through pydantic (``handler``), whose errors name the bad element.
    Either way the table must be rectangular, non-empty and finite."""
    arr = plain_number_rows(v)
    if arr is not None:
        # rows of its own, as pydantic's were (a caller's lists stay the caller's), unless load_release parsed them
        rows = v if (context or {}).get("parsed") else map(list.copy, v)
    else:
        v = rows = handler(v)
        if not v or not all(v):
            raise ValueError("must be a non-empty G x C table (one row per area)")
        width = len(v[0])
        if len(set(map(len, v))) != 1:  # ragged: name the first row that differs
            g = next(g for g, row in enumerate(v) if len(row) != width)
            raise ValueError(f"row {g} has {len(v[g])} cells, row 0 has {width}")
        arr = np.asarray(v, float)
        arr.flags.writeable = False
    finite = np.isfinite(arr)
    if not finite.all():
        g, c = (int(i[0]) for i in np.nonzero(~finite))
        raise ValueError(f"row {g} holds {v[g][c]}: values must be finite")
    out = NumberTable(rows)
    out.array = arr
    return out


class SmallAreaStatistics(BaseModel):
    model_config = ConfigDict(extra="forbid")
    counts: CountTable


class Invariants(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: exact (not noised) total of every area's cells
    area_totals: list[int] | None = None


class SmallAreaRelease(ReleaseBase):
    """Release of family ``small-area`` (docs/release-format.md, docs/small-area.md)."""

    family: Literal["small-area"]
    areas: list[str]
    parents: list[str] | None = None
    #: per area (G numbers) or per area and cell (G lists of C numbers: e.g. births in each period)
    exposure: list[float] | list[list[float]] | None = None
    cells: list[str]
    statistics: SmallAreaStatistics
    invariants: Invariants | None = None
    postprocessing: str = "none"
    #: :meth:`cell_mechanisms`, computed once (np.unique over G x C: 1.2 s at 10^7 cells)
    _cell_mechanisms: Any = PrivateAttr(default=None)
    _parent_index: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self):
        rec = self.statistics.counts
        G, C = len(self.areas), len(self.cells)
        if len(set(self.areas)) != G:
            raise ValueError("areas: ids must be distinct")
        if len(set(self.cells)) != C:
            raise ValueError("cells: labels must be distinct")
        y = table_array(rec.value)
        if y.shape != (G, C):
            raise ValueError(f"statistics.counts.value: is {y.shape[0]} x {y.shape[1]}, expected areas x cells = "
                             f"{G} x {C}")
        if self.parents is not None and len(self.parents) != G:
            raise ValueError(f"parents: has {len(self.parents)} ids, expected one per area ({G})")
        if self.exposure is not None:
            try:
                e = np.asarray(self.exposure, float)
            except ValueError:
                raise ValueError(f"exposure: must be {G} numbers (one per area) or {G} x {C} (per area and cell)")
            if e.shape not in ((G,), (G, C)):
                raise ValueError(f"exposure: is {'x'.join(map(str, e.shape))}, expected {G} numbers (one per area) "
                                 f"or {G} x {C} (per area and cell)")
            if not np.all(np.isfinite(e) & (e > 0)):
                raise ValueError("exposure: must be finite numbers > 0")
            if np.any(e < MIN_EXPOSURE):
                raise ValueError(f"exposure: {float(e.min()):g} is below {MIN_EXPOSURE:g}: rates count/exposure "
                                 "that large overflow the posterior's arithmetic (express the exposure in "
                                 "larger units)")
        if self.postprocessing not in POSTPROCESSING:
            raise ValueError(f"postprocessing: must be one of {', '.join(POSTPROCESSING)} (got {shown(self.postprocessing)})")
        if not accepts_mechanism(rec.mechanism):
            raise ValueError(f"statistics.counts.mechanism: must be one of {', '.join(SMALL_AREA_MECHANISMS)} or a "
                             "registered integer noise law")
        self._check_noise(rec, G, C)
        if np.any(np.abs(y) > MAX_COUNT):
            raise ValueError(f"statistics.counts.value: {float(np.abs(y).max()):g} is beyond 2^53, the largest count "
                             "the engines represent exactly")
        if get_mechanism(rec.mechanism).integer_valued and not np.all(y == np.round(y)):
            raise ValueError("statistics.counts.value: must hold integers for an integer-noise mechanism")
        if self.postprocessing == "nonnegative" and np.any(y < 0):
            raise ValueError("statistics.counts.value: negative with postprocessing 'nonnegative'")
        scale = self.noise_sigma()
        if np.any(y < -INCONSISTENCY_SCALES * scale):
            raise ValueError(f"statistics.counts.value: has a count more than {INCONSISTENCY_SCALES:g} noise scales "
                             "below 0")
        inv = self.invariants.area_totals if self.invariants is not None else None
        if inv is not None:
            t = np.asarray(inv, float)
            if t.shape != (G,) or np.any(t < 0):
                raise ValueError(f"invariants.area_totals: must be {G} non-negative integers (one per area)")
            spread = INCONSISTENCY_SCALES * np.sqrt((scale ** 2).sum(axis=1)) + 1.0
            bad = np.abs(y.sum(axis=1) - t) > spread
            if bad.any():
                g = int(np.flatnonzero(bad)[0])
                raise ValueError(f"invariants.area_totals: area {self.areas[g]!r} total {int(t[g])} is impossible "
                                 f"for its noisy cells (sum {y[g].sum():g})")
        return self

    def _check_noise(self, rec: CountTable, G: int, C: int) -> None:
        # replace-one: one person moves between two cells of the table: L1 = 2, L2 = sqrt(2)
        kind = get_mechanism(rec.mechanism)
        own = getattr(kind, "record_fields", ())
        for key in rec.model_extra or {}:
            if key not in own:
                raise ValueError(f"statistics.counts.{key}: unknown field")
        derived = math.sqrt(2.0) if kind.sensitivity_norm == "L2" else 2.0
        if rec.sensitivity is None:
            rec.sensitivity = derived
        elif not math.isclose(rec.sensitivity, derived, rel_tol=1e-9):
            raise ValueError(f"statistics.counts.sensitivity: must be {shown(derived)} (one person moves between two "
                             f"cells), got {shown(float(rec.sensitivity))}")
        if kind.noise_shape is NoiseShape.GAUSSIAN:  # sigma: one number, one per cell or G x C
            if rec.sigma is None:
                raise ValueError(f"statistics.counts.sigma: is required by mechanism {rec.mechanism!r}")
            sig = np.asarray(rec.sigma, float)
            if sig.ndim == 1 and sig.shape != (C,) or sig.ndim == 2 and sig.shape != (G, C) or sig.ndim > 2:
                raise ValueError(f"statistics.counts.sigma: must be one number, one per cell ({C}) or G x C "
                                 f"({G} x {C})")
            if not np.all(np.isfinite(sig) & (sig > 0)):
                raise ValueError("statistics.counts.sigma: must be finite numbers > 0")
            from ..mechanisms.discrete_gaussian import SIGMA_RANGE

            if not np.all((sig >= SIGMA_RANGE[0]) & (sig <= SIGMA_RANGE[1])):
                worst = float(sig.max() if sig.max() > SIGMA_RANGE[1] else sig.min())
                raise ValueError(f"statistics.counts.sigma: {worst:g} is outside [{SIGMA_RANGE[0]:g}, "
                                 f"{SIGMA_RANGE[1]:g}], where sigma^2 and rho stay finite")
            if kind.accounts_rho:
                for name in ("epsilon", "delta"):
                    if getattr(rec, name) is not None:
                        raise ValueError(f"statistics.counts.{name}: not a field of mechanism 'discrete-gaussian'")
                if rec.rho is not None and not math.isclose(rec.rho, self._rho(), rel_tol=1e-9):
                    raise ValueError(f"statistics.counts.rho: {rec.rho:g} disagrees with the noise (rho = {self._rho():g} "
                                     "for the worst pair of cells)")
            elif rec.epsilon is None or rec.delta is None:
                raise ValueError("statistics.counts: a gaussian table states its epsilon and delta")
            elif not self.not_dp:
                true_delta = self.gaussian_delta_at(rec.epsilon)
                if true_delta > rec.delta * (1.0 + 1e-9):
                    raise ValueError(f"statistics.counts.delta: {rec.delta:g} is below the delta {true_delta:.3g} "
                                     f"this noise gives at epsilon {rec.epsilon:g} (worst pair of cells, sigma "
                                     f"{self.worst_pair_sigmas()[0]:g} and {self.worst_pair_sigmas()[1]:g}): the "
                                     "stated privacy is more than the noise gives")
        elif kind.noise_shape is NoiseShape.LAPLACE:
            if rec.epsilon is None:
                raise ValueError(f"statistics.counts.epsilon: is required by mechanism {rec.mechanism!r}")
            check_epsilon_range(rec.epsilon, "release.statistics.counts.epsilon")
            for name in ("sigma", "delta", "rho"):
                if getattr(rec, name) is not None:
                    raise ValueError(f"statistics.counts.{name}: not a field of mechanism {rec.mechanism!r}")
        else:  # a registered integer law: its own fields, checked by its mechanism
            try:
                kind.check_record(rec)
            except ValueError as exc:
                raise ValueError(f"statistics.counts.{exc}") from None

    # ------------------------------------------------------------------ derived
    @property
    def G(self) -> int:
        return len(self.areas)

    @property
    def C(self) -> int:
        return len(self.cells)

    def released(self) -> np.ndarray:
        """The noisy table, G x C floats (a copy: the caller may change it)."""
        return np.array(table_array(self.statistics.counts.value))

    def exposures(self) -> np.ndarray:
        """The exposure as a G x C array (an exposure per area is the same for each of its cells)."""
        if self.exposure is None:
            return np.ones((self.G, self.C))
        e = np.asarray(self.exposure, float)
        return np.repeat(e[:, None], self.C, axis=1) if e.ndim == 1 else e

    def noise_sigma(self) -> np.ndarray:
        """The noise scale of every cell, G x C: sigma, or the (discrete-)Laplace scale 2/epsilon."""
        rec = self.statistics.counts
        if rec.sigma is not None:
            return np.broadcast_to(np.asarray(rec.sigma, float), (self.G, self.C)).copy()
        if rec.epsilon is not None:
            return np.full((self.G, self.C), rec.sensitivity / rec.epsilon)
        return np.full((self.G, self.C), self.cell_mechanism().noise_scale)  # a registered law: its sd

    def cell_mechanisms(self) -> tuple[np.ndarray, np.ndarray, list]:
        """(the distinct noise scales, each cell's index into them (G x C), the mechanism of each distinct scale);
        computed once per release (the engine's memory estimate, its noise tables and the direct estimator ask)."""
        if self._cell_mechanisms is not None:
            return self._cell_mechanisms
        rec = self.statistics.counts
        if rec.sigma is None or np.ndim(rec.sigma) < 2:  # one scale per cell at most: np.unique of C numbers
            row = self.noise_sigma()[0]
            distinct, inverse = np.unique(row, return_inverse=True)
            inverse = np.repeat(inverse.reshape(1, -1), self.G, axis=0)  # (np.unique of the table's, value for value)
        else:
            distinct, inverse = np.unique(self.noise_sigma(), return_inverse=True)
        kind = get_mechanism(self.statistics.counts.mechanism)
        if kind.noise_shape is None:  # a registered law: one set of parameters for every cell
            mechs = [self.cell_mechanism()] * len(distinct)
        else:
            mechs = [kind.with_scale(float(s)) for s in distinct]
        self._cell_mechanisms = (distinct, inverse.reshape(self.G, self.C), mechs)
        return self._cell_mechanisms

    def released_tables(self):
        """The noisy G x C table, each cell with its own law (per-cell sigma), axes (area, cell)."""
        _, index, mechs = self.cell_mechanisms()
        return [("counts", self.released(), list(mechs), np.asarray(index),
                 ("area", "cell"))]

    def cell_mechanism(self):
        """The mechanism of every cell, where one law with one set of parameters covers the table (a Laplace-shaped
        table or a registered integer law; a Gaussian-shaped one may give each cell its own sigma)."""
        from ..mechanisms.registry import from_record

        return from_record(self.statistics.counts)

    def parent_index(self) -> tuple[np.ndarray, list[str]]:
        """(index of each area's parent, the parent ids in first-seen order); empty without parents."""
        if self.parents is None:
            return np.zeros(0, dtype=np.int64), []
        # computed once per release: a Python pass over the areas, asked by the engine and its observation model
        if self._parent_index is None:
            ids: dict[str, int] = {}
            idx = np.array([ids.setdefault(p, len(ids)) for p in self.parents], dtype=np.int64)
            self._parent_index = (idx, list(ids))
        idx, ids = self._parent_index
        return idx, list(ids)

    def worst_pair_sigmas(self) -> tuple[float, float]:
        """The noise of the two cells a replaced record moves between in the worst case: the two smallest
        entries of the full G x C noise table (one number per cell broadcast over the areas, so with G >= 2
        areas the smallest per-cell sigma appears twice: the same cell of two areas)."""
        sig = np.sort(self.noise_sigma().ravel())
        return (float(sig[0]), float(sig[0])) if sig.size == 1 else (float(sig[0]), float(sig[1]))

    def _rho(self) -> float:
        a, b = self.worst_pair_sigmas()
        return 0.5 * (1.0 / a ** 2 + 1.0 / b ** 2)

    def gaussian_delta_at(self, epsilon: float) -> float:
        """delta(epsilon) of continuous Gaussian noise on the worst pair of cells (Balle & Wang 2018, Thm 8: two
        independent unit shifts are one shift of L2 norm sqrt(1/sigma_a^2 + 1/sigma_b^2) in noise units)."""
        from ..mechanisms.gaussian import _delta_of_sigma

        a, b = self.worst_pair_sigmas()
        return max(0.0, _delta_of_sigma(1.0, epsilon, math.sqrt(1.0 / a ** 2 + 1.0 / b ** 2)))

    def privacy(self):
        """The worst neighbouring pair is one record moved between two cells: the two cells of smallest noise,
        each shifted by one.  discrete Gaussian: their privacy loss distributions composed (dp-accounting,
        pessimistic), rho beside; gaussian: the tight epsilon at the stated delta (the stated pair is checked on
        loading); (discrete) Laplace: epsilon (L1 sensitivity 2)."""
        from ..mechanisms.accounting import Loss, PrivacyCost, zcdp_pair_epsilon

        rec = self.statistics.counts
        delta = self.reporting_delta()
        kind = get_mechanism(rec.mechanism)
        if kind.noise_shape is NoiseShape.GAUSSIAN:
            a, b = self.worst_pair_sigmas()
            losses = (Loss(kind.loss_kind, a, 1.0), Loss(kind.loss_kind, b, 1.0))
            rho = self._rho()
            if not kind.accounts_rho:
                from ..mechanisms.gaussian import epsilon_of_sigma

                d = float(rec.delta)
                eps = epsilon_of_sigma(1.0, d, math.sqrt(1.0 / a ** 2 + 1.0 / b ** 2))
                return PrivacyCost(eps, d, None, "approximate", "tight epsilon of the worst pair of cells at the "
                                   f"stated delta (Balle & Wang 2018, Thm 8; stated epsilon {rec.epsilon:g})",
                                   losses=losses)
            eps, how = zcdp_pair_epsilon(losses, delta)
            return PrivacyCost(eps, delta, rho, "zcdp", f"(epsilon, delta): {how}; rho of the worst pair of cells",
                               losses=losses)
        if kind.loss_kind is None:  # a registered integer law: two cells shifted by one, from its mass function
            return self.cell_mechanism().privacy_accounting(delta, 2, (1.0, 1.0))
        b = float(rec.sensitivity) / float(rec.epsilon)
        return PrivacyCost(float(rec.epsilon), 0.0, None, "pure", "pure epsilon-DP (L1 sensitivity 2)",
                           losses=(Loss(kind.loss_kind, b, 1.0), Loss(kind.loss_kind, b, 1.0)))

    def area_totals(self) -> np.ndarray | None:
        if self.invariants is None or self.invariants.area_totals is None:
            return None
        return np.asarray(self.invariants.area_totals, dtype=np.int64)


# --------------------------------------------------------------------------- prior
class SmallAreaPrior(BaseModel):
    """alpha_c ~ N(alpha_mean, alpha_sd^2); tau ~ half-N(0, tau_scale^2); tau_parent ~ half-N(0, tau_parent_scale^2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["small-area"] = "small-area"
    alpha_mean: float = 0.0
    alpha_sd: float = Field(10.0, gt=0)
    tau_scale: float = Field(1.0, gt=0)
    tau_parent_scale: float = Field(1.0, gt=0)

    def to_dict(self) -> dict:
        return self.model_dump()


def parse_prior(prior: Any, release=None) -> SmallAreaPrior:
    if prior is None:
        return SmallAreaPrior()
    if isinstance(prior, SmallAreaPrior):
        return prior
    if not isinstance(prior, dict):
        raise InputError("prior", "must be a table of alpha_mean, alpha_sd, tau_scale, tau_parent_scale")
    from pydantic import ValidationError

    from ..errors import from_pydantic

    try:
        return SmallAreaPrior.model_validate({"kind": "small-area", **prior})
    except ValidationError as exc:
        raise from_pydantic(exc, "prior") from None


# --------------------------------------------------------------------------- curators and readers
def _release_dict(areas, cells, noisy, record, exposure=None, parents=None, totals=None, post="none",
                  description=None) -> dict:
    out: dict[str, Any] = {"format": FORMAT, "family": "small-area", "areas": [str(a) for a in areas],
                           "cells": [str(c) for c in cells], "statistics": {"counts": {"value": noisy, **record}},
                           "postprocessing": post}
    if exposure is not None:
        out["exposure"] = [float(e) for e in exposure]
    if parents is not None:
        out["parents"] = [str(p) for p in parents]
    if totals is not None:
        out["invariants"] = {"area_totals": [int(t) for t in totals]}
    if description:
        out["description"] = description
    return out


#: the small-area curator's typed options (docs/cli.md, "Curator options")
SmallAreaCuratorOptions = curator_options("small-area", "rho", "mechanism", "area_column", "cell_column", "exposure",
                                          "postprocessing", "areas", "cells", module=__name__)


def _ids(col):
    """An id column as strings; whole numbers stay whole ('7', not '7.0', when pandas read them as floats)."""
    if col.dtype.kind == "f" and np.all(np.isfinite(col.to_numpy())) and np.all(col.to_numpy() % 1 == 0):
        col = col.astype(np.int64)
    return col.astype(str).str.strip()


def _public_list(given, field: str) -> list[str]:
    ids = [str(x).strip() for x in given]
    for x, raw in zip(ids, given):
        if raw is None or not x or x == "nan":
            raise InputError(field, f"an empty {field[:-1]} id ({raw!r}) in the public list")
    if len(set(ids)) != len(ids):
        raise InputError(field, f"{field[:-1]} {next(x for x in ids if ids.count(x) > 1)!r} is listed twice")
    if not ids:
        raise InputError(field, "the public list is empty")
    return ids


@curator(SmallAreaCuratorOptions)
def curate(frame, options) -> dict:
    """Record-level CSV -> noisy area x cell table (``--area-column``, ``--cell-column``; public ``--exposure``
    CSV of area, exposure; ``--mechanism discrete-gaussian --rho R`` (default) or discrete-laplace/laplace
    ``--epsilon E``).

    The areas are the public list ``areas`` (``--areas FILE``), else the exposure file's areas; the cells
    the public list ``cells`` (``--cells FILE``).  Every listed area and cell is released, those with no
    record as 0 + noise.  A list read from the data instead reveals which areas (cells) have records, which
    the noise does not cover: the curator says so (a :class:`~dpposterior.errors.CuratorWarning`, printed
    by the CLI, and a note in the release)."""
    import warnings

    from ..errors import CuratorWarning
    from ..mechanisms.noise import draw_noise
    from ._curate import require_column

    area_col, cell_col, exposure_map = options.area_column, options.cell_column, options.exposure
    areas, cells, post = options.areas, options.cells, options.postprocessing or "none"
    if exposure_map is not None:
        if not isinstance(exposure_map, dict):
            raise InputError("exposure", f"must map each area to its exposure (got {type(exposure_map).__name__})")
        exposure_map = {str(k).strip(): v for k, v in exposure_map.items()}
    a = _ids(require_column(frame, area_col, "area-column"))
    c = _ids(require_column(frame, cell_col, "cell-column"))
    from_data = []
    if areas is None and exposure_map is not None:
        areas = list(exposure_map)  # the public exposure file lists the areas
    if areas is None:
        areas = sorted(a.unique())
        from_data.append("areas")
    if cells is None:
        cells = sorted(c.unique())
        from_data.append("cells")
    areas, cells = _public_list(areas, "areas"), _public_list(cells, "cells")
    unknown = set(a.unique()) - set(areas)
    if unknown:
        raise InputError("area-column", f"area {sorted(unknown)[0]!r} is not among the declared areas")
    unknown = set(c.unique()) - set(cells)
    if unknown:
        raise InputError("cell-column", f"cell {sorted(unknown)[0]!r} is not among the declared cells")
    ai = {v: i for i, v in enumerate(areas)}
    ci = {v: i for i, v in enumerate(cells)}
    table = np.zeros((len(areas), len(cells)))
    np.add.at(table, (a.map(ai).to_numpy(int), c.map(ci).to_numpy(int)), 1.0)
    mech = options.mechanism or "discrete-gaussian"
    kind = get_mechanism(mech) if accepts_mechanism(mech) else None
    if kind is None or (not kind.integer_valued and kind.noise_shape is not NoiseShape.LAPLACE):
        raise InputError("mechanism", "small-area tables are released with discrete-gaussian, discrete-laplace, "
                         "laplace or a registered integer noise law")
    # replace-one: one person moves between two cells: L1 = 2, L2 = sqrt(2) (rho of the worst pair = 1/sigma^2)
    sens = math.sqrt(2.0) if kind.sensitivity_norm == "L2" else 2.0
    if kind.accounts_rho and options.rho is None:
        raise InputError("rho", f"is required with --mechanism {mech} (its zCDP budget)")
    scale, budget = kind.noise_for_budget(sens, epsilon=options.epsilon, rho=options.rho)
    record = {"mechanism": mech, **budget, "sensitivity": sens}
    noisy, sampler = draw_noise(mech, table.ravel(), scale, options.seed)
    noisy = noisy.reshape(table.shape)
    if kind.integer_valued:
        noisy = np.round(noisy)
    if post == "nonnegative":
        noisy = np.maximum(noisy, 0.0)
    record["sampler"] = sampler
    values = [[int(v) for v in row] for row in noisy] if kind.integer_valued else noisy.tolist()
    exposure = None
    if exposure_map is not None:
        missing = [x for x in areas if x not in exposure_map]
        if missing:
            raise InputError("exposure", f"no exposure for area {missing[0]!r}")
        exposure = [exposure_map[x] for x in areas]
    if from_data:
        what = " and ".join(from_data)
        note = (f"the {what} were read from the confidential data: the release shows which {what} have records, "
                f"which the noise does not protect; give the public list{'s' if len(from_data) > 1 else ''} "
                + " and ".join(f"--{w} FILE" for w in from_data))
        warnings.warn(CuratorWarning(note), stacklevel=3)
        record["note"] = note
    return _release_dict(areas, cells, values, record, exposure=exposure, post=post)


def read_measurements(path, *, mechanism: str = "discrete-gaussian", exposure=None, parents=None,
                      postprocessing: str = "none", description: str | None = None) -> dict:
    """A long-format noisy measurement table -> release dict.

    Columns (header row): ``area``, ``cell``, ``noisy_value``, ``noise_variance`` -- the shape of the
    Census noisy measurement files.  For the discrete Gaussian the variance is converted to the parameter
    sigma exactly (the variance of N_Z(0, sigma^2) is slightly below sigma^2; solved per distinct value).
    ``exposure``/``parents``: optional dicts area -> value, one entry per area.  Every (area, cell) must
    appear once; every noisy value must be an integer (the mechanisms are integer-valued) of at most 2^53
    in size, every variance a finite number > 0 -- the first bad cell is refused naming its data row.
    """
    import pandas as pd

    from ..errors import check_input_file

    check_input_file(path, "measurements")
    try:
        frame = pd.read_csv(path, dtype={"area": str, "cell": str}, skip_blank_lines=False)
    except Exception as exc:  # pandas raises many parser error types
        raise InputError("measurements", f"cannot read CSV {path} ({exc})") from None
    frame.columns = [c.strip() if isinstance(c, str) else c for c in frame.columns]
    for col in ("area", "cell", "noisy_value", "noise_variance"):
        if col not in frame.columns:
            raise InputError("measurements", f"no column {col!r} (columns: area, cell, noisy_value, noise_variance)")
    if len(frame) == 0:
        raise InputError("measurements", f"{path} has no rows")
    for col in ("area", "cell"):
        empty = frame[col].isna() | (frame[col].astype(str).str.strip() == "")
        if empty.any():
            raise InputError(f"measurements.{col}", f"row {int(np.flatnonzero(empty.to_numpy())[0]) + 1} is empty")
        frame[col] = frame[col].astype(str).str.strip()
    kind = get_mechanism(mechanism) if accepts_mechanism(mechanism) else None
    if kind is not None and kind.noise_shape is NoiseShape.GAUSSIAN and not kind.integer_valued:
        raise InputError("mechanism", "a continuous gaussian table needs its epsilon and delta: write the release "
                         "file directly")
    # a noise variance determines the parameter of the discrete Gaussian (sigma from its variance) only
    if kind is None or not (kind.noise_shape is NoiseShape.GAUSSIAN and kind.accounts_rho):
        raise InputError("mechanism", "long-format measurements carry a noise variance: discrete-gaussian")
    noisy = _number_column(frame, "noisy_value")
    bad = noisy != np.round(noisy)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError("measurements.noisy_value", f"row {row + 1}: {noisy[row]:g} is not an integer (mechanism "
                         f"{mechanism} releases integers)")
    bad = np.abs(noisy) > MAX_COUNT
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError("measurements.noisy_value", f"row {row + 1}: {noisy[row]:g} is beyond 2^53, the largest "
                         "count the engines represent exactly")
    variance = _number_column(frame, "noise_variance")
    bad = variance <= 0
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError("measurements.noise_variance", f"row {row + 1}: {variance[row]:g} is not > 0")
    frame["noisy_value"], frame["noise_variance"] = noisy, variance
    dup = frame.duplicated(["area", "cell"])
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise InputError("measurements", f"row {row + 1}: area {frame['area'][row]!r}, cell {frame['cell'][row]!r} "
                         "appears twice")
    areas = list(dict.fromkeys(frame["area"]))
    cells = list(dict.fromkeys(frame["cell"]))
    if len(frame) != len(areas) * len(cells):
        raise InputError("measurements", f"{len(frame)} rows for {len(areas)} areas x {len(cells)} cells: every "
                         "(area, cell) must appear exactly once")
    wide = frame.pivot(index="area", columns="cell", values="noisy_value").loc[areas, cells]
    var = frame.pivot(index="area", columns="cell", values="noise_variance").loc[areas, cells].to_numpy(float)
    sigma = sigma_of_variance(var)
    record = {"mechanism": mechanism, "sigma": sigma.tolist()}
    values = [[int(v) for v in row] for row in wide.to_numpy(float)]
    expo = None if exposure is None else [float(v) for v in _per_area(exposure, areas, "exposure", number=True)]
    par = None if parents is None else [str(p) for p in _per_area(parents, areas, "parents", number=False)]
    return _release_dict(areas, cells, values, record, exposure=expo, parents=par, post=postprocessing,
                         description=description)


def _number_column(frame, col: str) -> np.ndarray:
    """Column ``col`` of a measurement table as finite floats; the first empty or non-numeric cell refused."""
    from ._curate import numeric_values

    return numeric_values(frame[col], col, source="measurements")


def _per_area(mapping, areas: list[str], field: str, number: bool) -> list:
    """``mapping``'s value for every area (keys compared as strings), refusing a non-dict and a missing area."""
    if not isinstance(mapping, dict):
        raise InputError(field, f"must be a dict area -> value, one entry per area (got {type(mapping).__name__})")
    by_id = {str(k).strip(): v for k, v in mapping.items()}
    out = []
    for area in areas:
        if area not in by_id:
            raise InputError(field, f"no entry for area {area!r} ({len(areas)} areas in the measurements, "
                             f"{len(by_id)} entries)")
        value = by_id[area]
        if number:
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise InputError(field, f"area {area!r}: {value!r} is not a number") from None
        out.append(value)
    return out


def sigma_of_variance(var: np.ndarray) -> np.ndarray:
    """The discrete-Gaussian parameter sigma whose noise variance is ``var`` (elementwise)."""
    from scipy.optimize import brentq

    from ..mechanisms.discrete_gaussian import DiscreteGaussian

    out = np.empty_like(var, dtype=float)
    cache: dict[float, float] = {}
    for idx, v in np.ndenumerate(var):
        v = float(v)
        if v not in cache:
            if v > 4.0:  # variance equals sigma^2 to < 1e-9 relative beyond sigma ~ 2
                cache[v] = math.sqrt(v)
            else:
                cache[v] = brentq(lambda s: DiscreteGaussian(s).noise_variance - v, 1e-3, 3.0, xtol=1e-12)
        out[idx] = cache[v]
    return out


# --------------------------------------------------------------------------- simulation
def draw_parameters(prior: SmallAreaPrior, G: int, C: int, parent_index, rng, likelihood: str = "poisson",
                    tau: float | None = None) -> dict:
    """alpha[cell], tau, u[area] -- and, given each area's ``parent_index``, tau_parent and v[parent] -- from the
    prior, drawn from ``rng`` in that order, and the rate[area, cell] they give (the probability under
    ``likelihood="binomial"``); ``tau`` fixes the area-effect sd instead of drawing it."""
    alpha = rng.normal(prior.alpha_mean, prior.alpha_sd, size=C)
    tau = abs(rng.normal(0.0, prior.tau_scale)) if tau is None else float(tau)
    u = rng.normal(0.0, tau, size=G)
    draw = {"alpha": alpha, "tau": tau, "u": u}
    log_rate = alpha[None, :] + u[:, None]
    if parent_index is not None and len(parent_index):
        tau_p = abs(rng.normal(0.0, prior.tau_parent_scale))
        v = rng.normal(0.0, tau_p, size=int(np.max(parent_index)) + 1)
        log_rate = log_rate + v[parent_index][:, None]
        draw.update(tau_parent=tau_p, v=v)
    draw["rate"] = 1.0 / (1.0 + np.exp(-log_rate)) if likelihood == "binomial" else np.exp(log_rate)
    return draw


def simulate(prior: SmallAreaPrior, G: int, C: int, sigma: float, rng, exposure=None, postprocessing="none",
             parents=None, tau: float | None = None, likelihood: str = "poisson", noise=None):
    """theta ~ prior, counts ~ model, release through the discrete Gaussian (sigma per cell), or through
    ``noise`` = (the release record's mechanism fields, a seeded draw ``noise_draw(shape, rng)``) when given.

    ``tau`` fixes the area-effect sd (benchmarks) instead of drawing it.  ``likelihood="binomial"``: y ~
    Binomial(E, p), logit p = alpha + u (+ v), E the whole number at risk per area (``exposure``, required);
    ``truth["rate"]`` is then p.  Returns (truth dict, release dict)."""
    from ..mechanisms.discrete_gaussian import DiscreteGaussian

    if likelihood not in ("poisson", "binomial"):
        raise InputError("likelihood", f"must be poisson or binomial (got {shown(likelihood)})")
    if likelihood == "binomial" and (exposure is None or np.any(np.asarray(exposure) % 1 != 0)):
        raise InputError("exposure", "binomial counts need whole numbers at risk per area")
    E = np.ones(G) if exposure is None else np.asarray(exposure, float)
    truth = draw_parameters(prior, G, C, None if parents is None else np.asarray(parents), rng, likelihood, tau)
    rate = truth["rate"]
    if likelihood == "binomial":
        y = rng.binomial(E.astype(np.int64)[:, None], rate)
    else:
        y = rng.poisson(E[:, None] * rate)
    if noise is None:
        record = {"mechanism": "discrete-gaussian", "sigma": float(sigma)}
        noisy = y + DiscreteGaussian(sigma).draw(y.shape, rng)
    else:
        record, noise_draw = noise
        noisy = y + np.asarray(noise_draw(y.shape, rng)).astype(np.int64)
    if postprocessing == "nonnegative":
        noisy = np.maximum(noisy, 0)
    truth["counts"] = y
    release = _release_dict([f"a{g}" for g in range(G)], [f"c{c}" for c in range(C)],
                            noisy.astype(int).tolist(), dict(record),
                            exposure=None if exposure is None else E,
                            parents=None if parents is None else [f"p{p}" for p in parents], post=postprocessing)
    return truth, release


def simulated_mechanism(epsilon: float) -> dict:
    """What the simulator's own release is, given calibrate's ``--epsilon`` (the result JSON records it)."""
    return {"name": "discrete-gaussian", "epsilon": float(epsilon), "rho": 0.5 * float(epsilon) ** 2,
            "note": "the small-area simulator reads --epsilon as rho = epsilon^2 / 2 (sigma = 1 / sqrt(rho))"}


def simulate_release(prior: SmallAreaPrior, n: int, epsilon: float | None, rng, mechanism: str | None = None,
                     rho: float | None = None):
    """``Family.simulate`` for ``dpposterior calibrate``: ``n`` areas, 2 cells, exposures uniform on [5, 50], theta
    from the prior, and the table released through ``mechanism`` at its budget (``rho`` for a zCDP law, ``epsilon``
    otherwise; replace-one sensitivity L2 sqrt(2), L1 2).  Without ``mechanism``: the discrete Gaussian at
    rho = epsilon^2 / 2 per person (sigma = 1 / sqrt(rho))."""
    from . import SimulatedRelease
    from ..release import load_release

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError("n", f"must be an integer >= 1 (the number of areas; got {shown(n)})")
    noise = None
    if mechanism is None:
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
            raise InputError("epsilon", f"must be a finite number > 0 (got {shown(epsilon)})")
        sigma = 1.0 / math.sqrt(0.5 * epsilon ** 2)
    else:
        if not accepts_mechanism(mechanism):
            raise InputError("mechanism", f"{shown(mechanism)} is not a small-area mechanism")
        kind = get_mechanism(mechanism)
        sens = math.sqrt(2.0) if kind.sensitivity_norm == "L2" else 2.0
        scale, fields = kind.noise_for_budget(sens, epsilon=epsilon, rho=rho)
        if not kind.integer_valued:
            raise InputError("mechanism", f"{mechanism} is continuous noise: the small-area simulator releases "
                             "integer counts (discrete-gaussian, discrete-laplace or a registered integer law)")
        noise = ({"mechanism": mechanism, **fields, "sensitivity": sens},
                 lambda shape, gen: kind.numpy_noise(scale, shape, gen))
        sigma = None
    truth, release = simulate(prior, int(n), 2, sigma, rng, exposure=rng.uniform(5.0, 50.0, size=int(n)),
                              noise=noise)
    theta = {"alpha": truth["alpha"], "tau": truth["tau"], "u": truth["u"]}
    return SimulatedRelease(theta=theta, release=load_release(release), confidential={"counts": truth["counts"]})


# --------------------------------------------------------------------------- observation model
class CountsQuery:
    """The G x C table of true counts itself: the released table is the counts plus each cell's noise."""

    def __init__(self, shape: tuple[int, int]):
        self.shape = tuple(shape)

    def __call__(self, latent) -> np.ndarray:
        return np.asarray(latent)


@dataclass(frozen=True)
class TrueCounts:
    """The latent G x C table's law beyond the parameters: the likelihood and each area's parent; its exposures
    and area totals are read from the release when asked (a 10^6-area release's lists are converted only if an
    engine uses them)."""

    release: SmallAreaRelease
    likelihood: str
    parent_index: np.ndarray

    def exposures(self) -> np.ndarray:
        return self.release.exposures()

    def area_totals(self) -> np.ndarray | None:
        return self.release.area_totals()


def observation_model(release: SmallAreaRelease, prior=None, likelihood: str = "poisson") -> ObservationModel:
    """The noisy G x C table as one measurement of the true counts, under the hierarchical model
    log (or logit, ``likelihood="binomial"``) rate[area, cell] = alpha[cell] + u[area] (+ v[parent]).

    Variables as the engines store them: ``alpha[cell]``, ``tau``, ``u[area]``, with parents ``tau_parent`` and
    ``v[parent]``, and ``rate[area, cell]`` (an engine whose rate table is too large to keep packs on the model
    without it).  Built from references to the release's arrays and labels: no per-cell Python objects."""
    prior = prior if isinstance(prior, SmallAreaPrior) else parse_prior(prior, release)
    if likelihood not in ("poisson", "binomial"):
        raise InputError("likelihood", f"must be poisson or binomial (got {shown(likelihood)})")
    G, C = release.G, release.C
    values = table_array(release.statistics.counts.value)
    def cell_laws():  # each cell's law as the release describes it (cell_mechanisms, cached by the release)
        _, index, mechanisms = release.cell_mechanisms()
        return mechanisms, index

    laws = TableLaws(release.statistics.counts.mechanism, cell_laws, "statistics.counts")
    measurement = Measurement("statistics.counts", values, CountsQuery((G, C)), laws)
    pidx, parent_ids = release.parent_index()
    latent = LatentStatistic(f"the true {G} x {C} table of {likelihood} counts",
                             frozenset({ENUMERATE, SIMULATE}), TrueCounts(release, likelihood, pidx))
    variables = [Variable("alpha", ("cell",), {"cell": release.cells}, "real"),
                 Variable("tau", (), {}, "positive"),
                 Variable("u", ("area",), {"area": release.areas}, "real")]
    if parent_ids:
        variables += [Variable("tau_parent", (), {}, "positive"),
                      Variable("v", ("parent",), {"parent": parent_ids}, "real")]
    variables.append(Variable("rate", ("area", "cell"), {}, "unit" if likelihood == "binomial" else "positive"))
    P = len(parent_ids)

    def sample(rng):
        return draw_parameters(prior, G, C, pidx, rng, likelihood)

    def log_normal(x, sd):
        x = np.asarray(x, float)
        return float(np.sum(-0.5 * (x / sd) ** 2 - math.log(sd) - 0.5 * math.log(2 * math.pi)))

    def log_density(values):
        """log p(alpha, tau, u (, tau_parent, v)): normal alpha, half-normal scales, normal effects given them
        (rate is a function of these, not a free variable)."""
        tau = float(values["tau"])
        if tau <= 0:
            return -math.inf
        lp = log_normal(np.asarray(values["alpha"], float) - prior.alpha_mean, prior.alpha_sd)
        lp += log_normal(tau, prior.tau_scale) + math.log(2.0) + log_normal(values["u"], tau)
        if P:
            taup = float(values["tau_parent"])
            if taup <= 0:
                return -math.inf
            lp += log_normal(taup, prior.tau_parent_scale) + math.log(2.0) + log_normal(values["v"], taup)
        return lp

    parameters = prior.to_dict()
    return ObservationModel("small-area", tuple(variables),
                            Prior(sample, parameters, log_density, "normal alpha, half-normal tau (and tau_parent)"),
                            latent, (measurement,))


FAMILY = Family(
    name="small-area",
    release_model=SmallAreaRelease,
    methods={"exact-da": EngineSpec.of("dpposterior.inference.small_area", "exact_da", "SmallAreaOptions"),
             "naive": EngineSpec.of("dpposterior.inference.small_area", "naive", "SmallAreaOptions")},
    auto_method="exact-da",
    parse_prior=parse_prior,
    curate=curate,
    naive_method="naive",
    simulate=simulate_release,
    simulate_mechanisms=("discrete-gaussian", "discrete-laplace"),
    simulates_integer_noise=True,
    hooks={"prior_moments": prior_moments.small_area, "simulated_mechanism": simulated_mechanism,
           "observation_model": observation_model},
    description="area x cell count tables with (discrete) noise: hierarchical Poisson model",
    mechanisms=SMALL_AREA_MECHANISMS,
)
