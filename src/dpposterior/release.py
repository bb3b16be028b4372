"""The public record: a DP release file (``dpposterior-release/1``, JSON).

A release names its ``family`` and carries the released ``statistics``, each a
record of its value and the mechanism that produced it (mechanism, epsilon,
sensitivity or sigma, the sampler that drew the noise).  Everything an analyst
needs to undo the mechanism in the likelihood is in the file; no data row is.

Each family (``dpposterior.families.<name>``) defines a pydantic model that
subclasses :class:`ReleaseBase`; :func:`load_release` validates a file against it
and turns the first problem into a one-line :class:`~dpposterior.errors.InputError`
naming the field, e.g. ``release.statistics.mean.epsilon: must be > 0``.
The format of every family is documented in ``docs/release-format.md``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from .errors import InputError, from_pydantic
from .mechanisms.registry import from_record, get_mechanism

FORMAT = "dpposterior-release/1"
#: the neighbouring relation of every release: same n, one record replaced (docs/privacy.md)
NEIGHBOURING = "replace-one"
#: relative slack when comparing a stated noise level with the required one (float round-off)
NOISE_RTOL = 1e-9
#: a released value further than this many Laplace scales from the range the data can give has
#: probability < exp(-50) ~ 2e-22 under the model: the release is inconsistent with its bounds and n
INCONSISTENCY_SCALES = 50.0


def require_within_reach(field: str, values, lo, hi, scale: float, what: str) -> None:
    """The shared rule for released values: refuse any further than INCONSISTENCY_SCALES noise scales
    outside [lo, hi], the range the statistic of bounded data can take (``lo``/``hi`` broadcast).

    Under the release's own model such a value has probability below exp(-50) (Laplace; far less for
    Gaussian noise): it did not come from this mechanism on data within these bounds, and analysing
    it would give a confident posterior at the edge of the parameter space.
    """
    v = np.asarray(values, float)
    lo_b, hi_b = np.broadcast_to(np.asarray(lo, float), v.shape), np.broadcast_to(np.asarray(hi, float), v.shape)
    slack = INCONSISTENCY_SCALES * float(scale)
    bad = (v < lo_b - slack) | (v > hi_b + slack)
    if bad.any():
        k = int(np.flatnonzero(bad.ravel())[0])
        raise InputError(field, f"{v.ravel()[k]:g} is more than {INCONSISTENCY_SCALES:g} noise scales ({scale:g}) "
                         f"outside [{lo_b.ravel()[k]:g}, {hi_b.ravel()[k]:g}], the range of {what}: the release is "
                         "inconsistent with its bounds")


def require_noise_at_least(field: str, stated: float, required: float, what: str = "sensitivity",
                           release: "ReleaseBase | None" = None) -> None:
    """Refuse a stated sensitivity (or sigma) below the replace-one value for the release's bounds.

    The one-line error names the field and both numbers.  A release marked ``not_dp`` (no
    privacy claimed, e.g. a paper reproduction) is exempt: its noise is analysed as stated.
    """
    if release is not None and getattr(release, "not_dp", None):
        return
    if not stated >= required * (1.0 - NOISE_RTOL):
        raise InputError(field, f"{stated:g} is smaller than the replace-one {what} {required:g} for these "
                         "bounds, so the release is not (epsilon, delta)-DP as stated (set \"not_dp\" with a "
                         "reason to analyse it anyway)")

#: the range of a statistic's epsilon in which its noise scale (sensitivity/epsilon, from a million
#: sensitivities down to a billionth of one) keeps released values and the engines' arithmetic finite and
#: resolved in double precision.  Outside it the curator once wrote values ~3e300 (epsilon = 1e-300) and
#: the gaussian sampler returned NaN (epsilon = 1e308): refused, not analysed
EPSILON_MIN = 1e-6
EPSILON_MAX = 1e9


def check_epsilon_range(epsilon: float, field: str | None = None) -> None:
    """Refuse an epsilon outside [EPSILON_MIN, EPSILON_MAX] (``field`` given: an InputError, else ValueError)."""
    if EPSILON_MIN <= epsilon <= EPSILON_MAX:
        return
    reason = (f"{epsilon:g} is outside [{EPSILON_MIN:g}, {EPSILON_MAX:g}], the range in which the noise scale "
              "(sensitivity/epsilon) keeps released values and the posterior arithmetic finite")
    if field is None:
        raise ValueError(reason)
    raise InputError(field, reason)


def default_delta(n: int) -> float:
    """The curators' default delta: min(1e-6, 1/n^2).

    delta is the probability that the epsilon guarantee fails; at delta = 1/n a mechanism may publish
    one whole record and still be "(epsilon, delta)-DP" (Dwork & Roth 2014, Sec. 2.3), so delta must be
    well below 1/n.  1/n^2 is the usual "much smaller than 1/n"; the cap 1e-6 keeps it small for small
    data sets too.  ``dpposterior release`` prints the delta it used.
    """
    return float(min(1e-6, 1.0 / float(n) ** 2))


#: a finite float (JSON NaN / Infinity are refused); ints are accepted, strings are not
FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]
PositiveFloat = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0)]


def _check_finite_nested(value: Any, what: str = "value") -> Any:
    """Validate a number or a (nested) list of numbers: all finite, none boolean or string."""
    arr_ok = True

    def walk(v):
        nonlocal arr_ok
        if isinstance(v, bool) or not isinstance(v, (int, float, list)):
            raise ValueError(f"{what} must be a number or a list of numbers")
        if isinstance(v, list):
            if len(v) == 0:
                raise ValueError(f"{what} must not be an empty list")
            for x in v:
                walk(x)
        elif not math.isfinite(v):
            raise ValueError(f"{what} must be finite (got {v})")

    walk(value)
    return value


class NumberTable(list):
    """A validated table (a list of rows of numbers) that also holds ``array``, its values as a read-only float64
    array, built once when it was validated.  The rows keep the numbers as given (a JSON integer stays an int);
    what the release's methods and engines read is ``array`` (:func:`table_array`), and a dump writes floats."""

    __slots__ = ("array",)


def table_array(value) -> np.ndarray:
    """A table's float64 values: the array built on validation (:class:`NumberTable`), else converted now."""
    return value.array if isinstance(value, NumberTable) else np.asarray(value, float)


def plain_number_rows(value) -> np.ndarray | None:
    """``value`` as a read-only float64 array when it is a non-empty list of equally long, non-empty lists of plain
    numbers (int, float, bool or numpy numbers: what ``list[list[float]]`` turns into the same floats), else None.

    One pass in C (np.array) instead of pydantic's 10^7 float objects for a 10^7-cell table.  None sends the value
    through pydantic's own per-element validation, so a bad element is refused with the same message as ever
    (its field path and index); the index is only looked for on that failure path."""
    if type(value) is not list or not value or set(map(type, value)) != {list}:
        return None
    try:
        arr = np.array(value)
    except (ValueError, TypeError, OverflowError):  # ragged, or a number beyond every dtype
        return None
    if arr.ndim != 2 or 0 in arr.shape or arr.dtype.kind not in "biuf":  # strings, None, objects: pydantic decides
        return None
    arr = arr.astype(np.float64, copy=False)
    arr.flags.writeable = False
    return arr


class StatisticRecord(BaseModel):
    """One released statistic and the mechanism that produced it.  A registered mechanism may name fields of its
    own (``IntegerNoise.record_fields``); any other key is refused by its mechanism's ``check_record``."""

    model_config = ConfigDict(extra="allow")

    value: Any
    #: a name registered in ``mechanisms.registry.MECHANISMS`` (laplace, gaussian, binomial-trajectory,
    #: discrete-laplace, discrete-gaussian); the mechanism says which of the fields below it needs
    #: (``Mechanism.check_record``): epsilon for the (epsilon, delta) mechanisms, sigma (+ optional rho)
    #: for the discrete Gaussian
    mechanism: str
    epsilon: PositiveFloat | None = None
    delta: Annotated[float, Field(strict=True, gt=0, lt=1)] | None = None
    sensitivity: PositiveFloat | None = None
    sigma: PositiveFloat | None = None
    #: discrete-gaussian: the zCDP budget rho = sensitivity^2 / (2 sigma^2) (optional; refused if it disagrees)
    rho: PositiveFloat | None = None
    #: which sampler drew the noise (curator output), e.g. "opendp-0.16.0"
    sampler: str | None = None
    #: naive-bayes: "counts" or "proportions"
    scale: str | None = None
    #: binomial-trajectory: number of binomial trials N and offset m
    trials: Annotated[int, Field(strict=True, ge=1)] | None = None
    m: PositiveFloat | None = None
    note: str | None = None

    @field_validator("value")
    @classmethod
    def _finite(cls, v):
        return _check_finite_nested(v)

    @field_validator("mechanism")
    @classmethod
    def _registered(cls, v):
        try:
            get_mechanism(v)
        except InputError as exc:  # pydantic prefixes the field path itself
            raise ValueError(exc.reason) from None
        return v

    @field_validator("epsilon")
    @classmethod
    def _epsilon_range(cls, v):
        if v is not None:
            check_epsilon_range(v)
        return v

    @model_validator(mode="after")
    def _fields_of_mechanism(self):
        # the mechanism decides which fields it needs and refuses the others (one line, field first)
        kind = get_mechanism(self.mechanism)
        own = getattr(kind, "record_fields", ())
        for key in self.model_extra or {}:
            if key not in own:
                raise ValueError(f"{key}: unknown field")
        kind.check_record(self)
        return self

    @property
    def integer_valued(self) -> bool:
        """Whether the mechanism releases integers (discrete noise on counts)."""
        return get_mechanism(self.mechanism).integer_valued

    def array(self) -> np.ndarray:
        return np.asarray(self.value, dtype=float)

    def noise_scale(self, sensitivity: float | None = None) -> float:
        """Laplace b = sensitivity/epsilon, or Gaussian sigma."""
        return from_record(self, sensitivity).noise_scale


class ReleaseBase(BaseModel):
    """Fields shared by every release; families subclass it."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["dpposterior-release/1"]
    family: str
    #: the neighbouring relation the (epsilon, delta) guarantee is stated under: data sets of the
    #: same (public) n that differ in ONE REPLACED record.  Every curator writes it; a file without
    #: it (older versions) is read as "replace-one", the only relation this version supports.
    neighbouring: str = NEIGHBOURING
    #: set (with the reason) when the noise is NOT calibrated to (epsilon, delta)-DP under
    #: ``neighbouring`` -- a reproduction of a paper's own noise level, a test with tiny noise.
    #: Such a release can still be analysed (the stated noise is what the likelihood uses), but
    #: no privacy is claimed, and ``infer`` says so.
    not_dp: str | None = None
    #: free text the curator may add (data source, date); never data rows
    description: str | None = None
    #: where a zCDP (discrete-gaussian) release reports its (epsilon, delta) equivalent; default
    #: min(1e-6, 1/n^2) (``default_delta``)
    report_delta: Annotated[float, Field(strict=True, gt=0, lt=1)] | None = None
    #: the curator's accounting of the whole release (``dpposterior release`` writes it): epsilon, delta, rho
    #: (zCDP releases), the accountant's note and, when the noise was found from a target, the target.
    #: Checked on loading: a stated epsilon or rho below what the noise gives is refused
    accounting: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _report_delta_below_one_over_n(self):
        n = getattr(self, "n", None)
        if self.report_delta is not None and isinstance(n, int) and n > 0 and self.report_delta >= 1.0 / n:
            raise ValueError(f"report_delta: {self.report_delta:g} is not below 1/n = {1.0 / n:.3g} (at delta >= 1/n "
                             "a mechanism may publish a whole record and still meet (epsilon, delta))")
        return self

    @field_validator("neighbouring")
    @classmethod
    def _neighbouring(cls, v):
        if v != NEIGHBOURING:
            raise ValueError(f"must be {NEIGHBOURING!r} (same n, one record replaced); got {v!r}")
        return v

    @field_validator("not_dp")
    @classmethod
    def _not_dp(cls, v):
        if v is not None and not v.strip():
            raise ValueError("must say why the release is not (epsilon, delta)-DP (a non-empty string)")
        return v

    @property
    def is_dp(self) -> bool:
        """False when the file says its noise is not calibrated to its stated (epsilon, delta)."""
        return self.not_dp is None

    _sha256: str = PrivateAttr(default="")
    #: the JSON text the release was read from (or last saved as): what a posterior stores as ``release_json``
    #: without dumping a 10^7-cell table again
    _source_text: Any = PrivateAttr(default=None)
    #: the registered Family, found once by load_release (or on first use)
    _family_entry: Any = PrivateAttr(default=None)

    @property
    def family_entry(self):
        """The registered :class:`~dpposterior.families.Family` of this release (looked up once)."""
        if self._family_entry is None:
            from .families import get_family

            self._family_entry = get_family(self.family, field="release.family")
        return self._family_entry

    def observation_model(self, prior=None, **choices):
        """The release's :class:`~dpposterior.observation.ObservationModel`, as its family builds it (the family's
        ``observation_model`` hook), holding this release (``model.release``) and the family's parsed prior
        (``model.prior.spec``): what every engine receives.  ``prior``: anything the family's ``parse_prior``
        reads; ``choices``: the engine options that choose the model itself
        (:meth:`~dpposterior.options.EngineOptions.model_choices`, e.g. small-area's ``likelihood``)."""
        import dataclasses

        family = self.family_entry
        spec = family.parse_prior(prior, self)
        model = family.hooks["observation_model"](self, spec, **choices)
        return dataclasses.replace(model, release=self, prior=dataclasses.replace(model.prior, spec=spec))

    @property
    def sha256(self) -> str:
        """sha256 of the file's bytes (or of the canonical JSON for in-memory releases)."""
        return self._sha256

    def to_dict(self) -> dict:
        return self.model_dump(mode="json", exclude_none=True)

    def source_json(self) -> str:
        """The release as JSON text: the text it was read from or saved as (the bytes ``sha256`` is of), else the
        canonical dump of :meth:`to_dict`."""
        if self._source_text is not None:
            return self._source_text
        return json.dumps(self.to_dict(), sort_keys=True)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def save(self, path: str | os.PathLike) -> None:
        from .files import write_bytes

        text = self.to_json()
        write_bytes(path, text, field="out")  # atomic: unique temporary name, fsync, rename
        self._sha256 = hashlib.sha256(text.encode()).hexdigest()
        self._source_text = text

    def reporting_delta(self) -> float:
        """The delta at which a zCDP release states its (epsilon, delta)."""
        if self.report_delta is not None:
            return float(self.report_delta)
        n = getattr(self, "n", None)
        return default_delta(n) if isinstance(n, int) and n > 0 else 1e-6

    def privacy(self):
        """The release's :class:`~dpposterior.mechanisms.accounting.PrivacyCost`: basic composition of
        (epsilon, delta) statistics, rho-zCDP where any statistic is accounted in rho (docs/privacy.md).
        The one place a family states how its release composes (override this, not total_privacy_cost)."""
        from .mechanisms.accounting import compose

        delta = self.reporting_delta()
        return flag_large_delta(compose([record_cost(rec, delta) for rec in _records(self)], delta),
                                getattr(self, "n", None))

    def after_load(self, base_dir) -> None:
        """Called by :func:`load_release` after validation, with the directory of the release file (None for a
        dict or string): a family whose tables are files beside its manifest reads them here."""

    def released_tables(self) -> list[tuple]:
        """Every released table as (name, values, its mechanisms, each cell's index into them or None for one
        mechanism, the names of its axes[, why it has no noise law]): what ``dpposterior.ppl.from_release``
        conditions a model on.  Here each
        statistic record by its field path (``statistics.successes``); a family whose tables are not statistic
        records, or whose cells differ in their noise, states its own."""
        out = []
        for path, rec in named_records(self):
            try:
                out.append((path, rec.array(), [from_record(rec)], None, ()))
            except (InputError, ValueError) as exc:  # a mechanism only its family builds: no law of its own
                out.append((path, rec.array(), [], None, (), getattr(exc, "reason", None) or str(exc)))
        return out

    def total_privacy_cost(self) -> tuple[float, float]:
        """(epsilon, delta) of the whole release (:meth:`privacy`)."""
        return self.privacy().as_tuple()


def flag_large_delta(cost, n):
    """A guarantee whose delta is not below 1/n says so in its note (the stated deltas of (epsilon, delta)
    statistics are the curator's choice; ``report_delta`` at or above 1/n is refused on loading)."""
    import dataclasses

    if isinstance(n, int) and n > 0 and cost.delta >= 1.0 / n:
        return dataclasses.replace(cost, note=f"{cost.note}; WARNING: delta {cost.delta:.3g} is not below 1/n = "
                                   f"{1.0 / n:.3g}: a mechanism may publish a whole record and still meet it")
    return cost


def record_cost(rec: StatisticRecord, delta: float, sensitivity: float | None = None):
    """One statistic's PrivacyCost with its worst neighbouring pair (``PrivacyCost.losses``): its mechanism's
    accounting when it is stated in rho (no epsilon), else the stated (epsilon, delta)."""
    from .mechanisms.accounting import PrivacyCost

    dim = 2 if isinstance(rec.value, list) else 1  # a vector (any list) or one count
    if rec.epsilon is None:
        return from_record(rec, sensitivity).privacy_accounting(delta, dim)
    dlt = float(rec.delta or 0.0)
    try:
        losses = from_record(rec, sensitivity).privacy_accounting(delta, dim).losses
    except (ValueError, TypeError, NotImplementedError):  # a mechanism its family builds: stated cost only
        losses = ()
    return PrivacyCost(float(rec.epsilon), dlt, None, "approximate" if dlt > 0 else "pure",
                       "approximate (epsilon, delta)-DP" if dlt > 0 else "pure epsilon-DP", losses=losses)


#: the largest record count: beyond 2^53 integers are not exact in double precision
MAX_N = 2 ** 53


def _check_counts(data: dict) -> None:
    """Refuse record counts no data set has and floating point cannot hold exactly (e.g. n = 10^30)."""
    places = [("release.n", data.get("n"))]
    parties = data.get("parties")
    if isinstance(parties, list):
        places += [(f"release.parties.{j}.n", p.get("n")) for j, p in enumerate(parties) if isinstance(p, dict)]
    for field, n in places:
        if isinstance(n, (int, float)) and not isinstance(n, bool) and n > MAX_N:
            raise InputError(field, f"{n:g} records is more than 2^53 = {MAX_N}, beyond which counts are not "
                             "exact in double precision")


def padded_shape(value) -> tuple[int, ...]:
    """The box a nested list of numbers fills when padded: the longest list at each depth (a ragged table, stored
    padded with NaN, takes this much room)."""
    longest, level = [], [value]
    while level and all(isinstance(x, list) for x in level):
        longest.append(max(len(x) for x in level))
        level = [y for x in level for y in x]
    return tuple(longest)


def named_records(model: BaseModel, prefix: str = ""):
    """(dotted field path, StatisticRecord) for every record inside a release, in field order."""
    if isinstance(model, StatisticRecord):
        yield prefix, model
        return
    if isinstance(model, BaseModel):
        items = [(name, getattr(model, name)) for name in type(model).model_fields]
    elif isinstance(model, dict):
        items = list(model.items())
    elif isinstance(model, (list, tuple)):
        items = list(enumerate(model))
    else:
        return
    for key, value in items:
        if isinstance(value, (BaseModel, dict, list, tuple)):
            yield from named_records(value, f"{prefix}.{key}" if prefix else str(key))


def _records(model: BaseModel):
    """All StatisticRecord instances inside a release, last field first (the order the privacy composition has
    always taken them in: a composition's last bits depend on it)."""
    return [rec for _, rec in reversed(list(named_records(model)))]


#: the deepest nesting of objects and lists a release file may have (the deepest format, a
#: multi-party regression, needs 6): deeper input is refused in one line before it can exhaust
#: Python's recursion in the parser or the validators
MAX_JSON_DEPTH = 32


def _refuse_duplicate_keys(field: str):
    """``object_pairs_hook`` for :func:`json.loads`: a key given twice is refused, naming it.

    Python's json keeps the last value silently (``n`` 50 then 5000 is read as 5000): a release whose
    author meant the first would be analysed wrongly.
    """
    def hook(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise InputError(field, f"key {key!r} appears twice in one object; a JSON file must give each "
                                 "key once")
            seen[key] = value
        return seen
    return hook


def json_depth_at_most(data: Any, limit: int, field: str) -> None:
    """Refuse objects and lists nested deeper than ``limit`` (walked without recursion)."""
    containers = (dict, list)
    stack = [(data, 1)] if isinstance(data, containers) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            raise InputError(field, f"is nested more than {limit} levels deep; no valid file is")
        # only containers are pushed: a table of 10^7 numbers is scanned once, not stacked number by number
        children = node.values() if isinstance(node, dict) else node
        kinds = set(map(type, children))
        if not kinds & {dict, list}:
            continue
        if kinds == {list} and not set(map(type, itertools.chain.from_iterable(children))) & {dict, list}:
            # a table (a list of lists of numbers): one pass in C over its cells, its rows never stacked
            if depth + 1 > limit:
                raise InputError(field, f"is nested more than {limit} levels deep; no valid file is")
            continue
        stack.extend([(child, depth + 1) for child in children if isinstance(child, containers)])


def parse_json(text, field: str, limit: int = MAX_JSON_DEPTH) -> Any:
    """JSON text or bytes -> data, refusing in one line (``field: reason``) what the standard parser
    accepts or crashes on: duplicate keys, nesting deeper than ``limit``, invalid JSON."""
    try:
        data = json.loads(text, object_pairs_hook=_refuse_duplicate_keys(field))
    except RecursionError:
        raise InputError(field, f"is nested more than {limit} levels deep; no valid file is") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(field, f"not valid JSON ({exc})") from None
    json_depth_at_most(data, limit, field)
    return data


def load_release(source) -> ReleaseBase:
    """Validate a release from a path, a JSON string, a dict, or pass a release through.

    Raises :class:`InputError` (field path + reason) on the first problem found.
    """
    if isinstance(source, ReleaseBase):
        return source
    from .long_lived import collector_paused

    with collector_paused(freeze=False):  # a large release is a million lists, all alive at the end: nothing to collect
        return _load_release(source)


def _load_release(source) -> ReleaseBase:
    raw_bytes: bytes
    if isinstance(source, dict):
        data = source
        json_depth_at_most(data, MAX_JSON_DEPTH, "release")
        try:
            text = json.dumps(source, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise InputError("release", f"is not plain JSON data ({exc})") from None
        raw_bytes = text.encode()
    elif isinstance(source, (str, os.PathLike)):
        from .errors import check_input_file

        path = Path(source)
        check_input_file(path, "release")
        raw_bytes = path.read_bytes()
        # decoded once, for the parser and the stored source (78 MB at 10^7 cells); the parser reads UTF-16/32 and
        # a UTF-8 byte-order mark from the bytes themselves
        try:
            text = raw_bytes.decode("utf-8")
        except UnicodeDecodeError:  # UTF-16/32 JSON: the posterior stores the canonical dump instead
            text = None
        data = parse_json(raw_bytes if text is None or text.startswith("\ufeff") else text, "release")
    else:
        raise InputError("release", "must be a path to a release file, a dict or a loaded release "
                         f"(got {type(source).__name__})")
    if not isinstance(data, dict):
        raise InputError("release", "must be a JSON object")
    fmt = data.get("format")
    if fmt != FORMAT:
        raise InputError("release.format", f"must be {FORMAT!r} (got {fmt!r})")
    _check_counts(data)
    family_name = data.get("family")
    from .families import get_family

    family = get_family(family_name, field="release.family")
    try:
        # parsed here: its lists are the release's own to keep (a caller's dict is copied where it is kept)
        release = family.release_model.model_validate(data, context={"parsed": data is not source})
    except ValidationError as exc:
        raise from_pydantic(exc, "release") from None
    release._sha256 = hashlib.sha256(raw_bytes).hexdigest()
    release._source_text = text
    release._family_entry = family
    # a release whose tables live beside it (the census family's measurements file) reads them now
    release.after_load(Path(source).parent if isinstance(source, (str, os.PathLike)) else None)
    if release.accounting is not None and release.is_dp:
        check_stated_accounting(release)
    return release


def accounting_record(release: "ReleaseBase", target: dict | None = None) -> dict:
    """What a curator writes as the release's ``accounting``: the tight (epsilon, delta), rho where the release
    is zCDP, which accountant gave them and, when the noise was found from a target, the target."""
    cost = release.privacy()
    out: dict[str, Any] = {"epsilon": float(cost.epsilon), "delta": float(cost.delta)}
    if cost.rho is not None:
        out["rho"] = float(cost.rho)
    out["note"] = cost.note
    if target:
        out["target"] = dict(target)
    return out


def check_stated_accounting(release: "ReleaseBase") -> None:
    """Refuse a stated ``accounting`` that claims more privacy than the noise gives (epsilon or rho below the
    accountant's, at the same delta), in one line naming the field."""
    from .mechanisms.accounting import PLD_RTOL

    stated = release.accounting or {}
    for key in ("epsilon", "delta"):
        v = stated.get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            raise InputError(f"release.accounting.{key}", f"must be a finite number >= 0 (got {v!r})")
    cost = release.privacy()
    if not math.isclose(float(stated["delta"]), cost.delta, rel_tol=1e-9, abs_tol=0.0):
        raise InputError("release.accounting.delta", f"{stated['delta']:g} is not the delta the release reports "
                         f"({cost.delta:g}; set report_delta to change it)")
    if float(stated["epsilon"]) < cost.epsilon * (1.0 - PLD_RTOL):
        raise InputError("release.accounting.epsilon", f"{stated['epsilon']:g} is below the epsilon {cost.epsilon:.6g} "
                         f"that the noise gives at delta {cost.delta:g}: the stated privacy is more than the noise gives")
    rho = stated.get("rho")
    if rho is not None:
        if cost.rho is None:
            raise InputError("release.accounting.rho", "the release is not zCDP (an approximate-DP statistic)")
        if not isinstance(rho, (int, float)) or isinstance(rho, bool) or float(rho) < cost.rho * (1.0 - 1e-9):
            raise InputError("release.accounting.rho", f"{rho!r} is below the rho {cost.rho:.6g} that the noise gives")
