"""Family ``census``: the Census noisy measurement files -- a geographic hierarchy of noisy marginals of one latent
block-level histogram -- to posteriors of block-level counts (docs/census.md).

The release (``census_table`` describes its arrays): a JSON manifest with ``attributes`` (the histogram's axes),
``queries`` (marginals of it), ``levels`` (top first, ending in ``block``), ``invariants`` (persons published
exactly, e.g. state totals) and ``measurements``: a parquet or CSV file beside the manifest (or, in Python, a dict
of columns) holding one row per noisy cell -- ``level``, ``geocode``, ``query``, ``cell``, ``noisy_value``,
``variance``: discrete-Gaussian noise of the variance the Census publishes (Abowd et al. 2022, Sec. 5; Canonne,
Kamath & Steinke 2020 for the mechanism).

The model (docs/census.md, "Model and prior"): x[b, c] persons of cell c in block b,

    N_b = sum_c x[b, c] ~ NegBin(mean M_g(b), shape alpha)              blocks pooled within block groups g
    x[b, .] | N_b ~ DirichletMultinomial(N_b, beta * pi_t(b))           cells pooled toward their tract's mix
    log M_g ~ N(eta_t(g), tau^2),  eta_t ~ N(log size_mean, size_sd^2),  tau ~ half-N(0, tau_scale^2)
    pi_t ~ ScaledDirichlet(a, b): pi_t,c = g_c / sum g,  g_c ~ Gamma(shape a, rate b_c) independent
    log a ~ N(log 1, 1.5^2),  log b ~ N(0, 3^2 I) given sum_c log b_c = 0
    log alpha ~ N(log 0.5, 1.5^2),  log beta ~ N(log 10, 1.5^2)

-- the negative binomial holds the many empty blocks (a third of Hawaii's) and the few large ones; the
Dirichlet-multinomial lets a block's mix differ from its tract's by as much as the data say (beta).  The tract
mixes share one law whose shape and rates are learned: the rates set each cell's typical share and the shape how
much the shares vary between tracts, relative to their size, alike for rare and common cells (the scaled
Dirichlet: Monti, Mateu-Figueras & Pawlowsky-Glahn 2011, "Notes on the scaled Dirichlet distribution", in
Compositional Data Analysis, Wiley, Ch. 10; density Gamma(A) / prod Gamma(a_c) prod b_c^a_c pi_c^(a_c - 1) /
(sum_c b_c pi_c)^A, A = sum_c a_c, here every a_c = a).  A Dirichlet(1, ..., 1) on each tract -- the prior's
centre, a = b = 1 -- shrinks every tract toward equal shares, and a Dirichlet(gamma m) around one mix makes a
rare cell's share far more spread between tracts, relative to its size, than a common one's; Hawaii's tracts
have neither.  A shape per cell was tried: its chains did not mix on Hawaii (docs/census.md).  Every
measurement y_m = sum of x over its geounit's blocks and its query cell's histogram cells + discrete-Gaussian noise.

Privacy (replace-one): one person replaced changes, in every (level, query), at most two cells by one each (the
removed person's and the added person's), so the zCDP cost of the (level, query) is at most
(1/sigma_a^2 + 1/sigma_b^2)/2 over its two smallest sigmas, and the release composes these over every (level,
query) (Bun & Steinke 2016, Prop. 1.6 and Lemma 2.3).  Invariants are published exactly (as the Census's are);
the privacy statement covers the noisy measurements given them.  So are ``structural_zeros`` (cells that hold no
one in any block) and ``bounds`` (exact limits on the persons of query cells of geounits, the DAS's
``hhgq_total_lb`` / ``hhgq_total_ub``: ``census_table.check_bounds``); the posterior is restricted to where every
one of them holds.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import PrivateAttr

from . import EngineSpec, Family
from ..errors import InputError, shown
from ..observation import (ENUMERATE, RECORDS, SIMULATE, LatentStatistic, Measurement, ObservationModel, Prior,
                           TableLaws, Variable)
from ..release import ReleaseBase
from .census_table import BOUND_COLUMNS, CensusStructure, build_structure

#: the columns of a measurements table
COLUMNS = ("level", "geocode", "query", "cell", "noisy_value", "variance")


#: bytes of memory per measurement row at the peak of reading a release and indexing it (text columns as Python
#: strings, the arrow table, the structure's arrays): 667-760 measured on Hawaii's 440,000 and 1.3 million rows
#: (parquet), so a lower bound -- a file refused would not have fit
BYTES_PER_ROW = 600


def count_rows(path: Path) -> int:
    """Rows of a parquet file (its metadata) or a CSV file (its line breaks, one streaming pass; header not
    counted), without reading the table."""
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    import gzip

    opener = gzip.open if path.suffix.lower() == ".gz" else open
    lines = 0
    with opener(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 24), b""):
            lines += chunk.count(b"\n")
    return max(lines - 1, 0)


def read_table(path: Path, field_name: str = "measurements", columns: tuple = COLUMNS,
               may_be_empty: tuple = ()) -> dict:
    """The measurement columns of a parquet or CSV file (geocodes and cells read as text, so leading zeros stay).
    A file whose rows would not fit in the memory available is refused before it is read.  ``columns``: the
    columns read (a bounds table's: ``census_table.BOUND_COLUMNS``); ``may_be_empty``: those whose cells may be
    empty, read as text from CSV and as Python lists (None where empty)."""
    from ..errors import check_input_file
    from ..memory import check_fits

    check_input_file(path, field_name)
    suffix = "".join(path.suffixes[-2:]).lower()
    if path.suffix.lower() not in (".parquet", ".csv") and suffix != ".csv.gz":
        raise InputError(field_name, f"{path.name}: must be a .parquet or .csv file")
    try:
        rows = count_rows(path)
    except Exception as exc:  # pyarrow's or gzip's errors: one line naming the file
        raise InputError(field_name, f"{path.name} could not be read ({str(exc).splitlines()[0]})") from None
    check_fits(BYTES_PER_ROW * rows, field_name, f"reading {path.name} ({rows:,} rows)",
               "split the release into one file per state, or leave out levels")
    try:
        if path.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
        else:  # .csv or .csv.gz (checked above)
            import pyarrow as pa
            import pyarrow.csv as pacsv

            text = {c: pa.string() for c in ("level", "geocode", "query", "cell") + tuple(may_be_empty)}
            table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
                column_types=text, strings_can_be_null=False, quoted_strings_can_be_null=False))
    except Exception as exc:  # pyarrow's parse errors: one line naming the file
        raise InputError(field_name, f"{path.name} could not be read ({str(exc).splitlines()[0]})") from None
    missing = [c for c in columns if c not in table.column_names and c not in may_be_empty]
    if missing:
        raise InputError(field_name, f"{path.name} has no column {missing[0]!r} (needs: {', '.join(columns)})")
    out = {}
    for c in columns:
        if c in may_be_empty:
            if c in table.column_names:
                out[c] = table.column(c).to_pylist()
            continue
        col = table.column(c)
        if col.null_count:
            raise InputError(f"{field_name}.{c}", f"{path.name} has an empty {c} in {col.null_count} row(s)")
        out[c] = col.to_numpy(zero_copy_only=False)
    if out["geocode"].dtype.kind != "O" and out["geocode"].dtype.kind != "U":
        raise InputError(f"{field_name}.geocode", f"{path.name}: geocodes must be stored as text (GEOIDs keep their "
                         "leading zeros)")
    return out


class CensusRelease(ReleaseBase):
    """Release of family ``census`` (docs/census.md)."""

    family: Literal["census"]
    attributes: dict[str, list[str]]
    queries: dict[str, list[str]]
    levels: list[str]
    #: a parquet or CSV file name, relative to the manifest; or the columns themselves (a dict of lists)
    measurements: str | dict[str, Any]
    invariants: dict[str, dict[str, int]] | None = None
    #: the block GEOIDs (default: every block-level geocode of the measurements)
    blocks: list[str] | None = None
    #: partial cells ({attribute: label or [labels]}) that hold no one in any block: a schema fact (checked on load)
    structural_zeros: Any = None
    #: exact bounds on query cells of geounits (``census_table.check_bounds``): a parquet or CSV file name,
    #: relative to the manifest, or the rows themselves
    bounds: str | list[Any] | None = None
    #: how the noise was allocated (written by ``dpposterior.census.simulate``; provenance only)
    strategy: dict[str, Any] | None = None
    _structure: Any = PrivateAttr(default=None)

    def after_load(self, base_dir: Path | None) -> None:
        """Read the measurements table and index the release (every field checked, one-line errors)."""
        if isinstance(self.measurements, str):
            path = Path(self.measurements)
            if not path.is_absolute():
                path = (base_dir or Path.cwd()) / path
            rows = read_table(path)
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            self._sha256 = hashlib.sha256((self._sha256 + digest).encode()).hexdigest()
        else:
            rows = self.measurements
        bounds = self.bounds
        if isinstance(bounds, str):
            path = Path(bounds)
            if not path.is_absolute():
                path = (base_dir or Path.cwd()) / path
            bounds = read_table(path, "bounds", BOUND_COLUMNS, ("lower", "upper"))
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            self._sha256 = hashlib.sha256((self._sha256 + digest).encode()).hexdigest()
        self._structure = build_structure(self.attributes, self.queries, self.levels, rows, self.invariants,
                                          self.blocks, self.structural_zeros, bounds)

    @property
    def structure(self) -> CensusStructure:
        if self._structure is None:
            self.after_load(None)
        return self._structure

    def privacy(self):
        """Per (level, query) the worst pair of cells (its two smallest sigmas, each shifted by one), composed
        over every (level, query): privacy loss distributions (dp-accounting, pessimistic), rho beside."""
        from ..mechanisms.accounting import Loss, PrivacyCost, zcdp_pair_epsilon

        s = self.structure
        losses = []
        for li in range(s.L):
            for qi in range(s.Q):
                rows, units, _ = s.measured(li, qi)
                if rows.size == 0:
                    continue
                sig = np.sort(s.sigma[rows])
                # one geounit with one cell (a state's total) cannot hold both changed cells: one shift only
                if len(s.units[li]) == 1 and int(s.query_sizes[qi]) == 1:
                    losses.append(Loss("discrete-gaussian", float(sig[0]), 1.0))
                    continue
                second = float(sig[1]) if sig.size > 1 else float(sig[0])
                losses += [Loss("discrete-gaussian", float(sig[0]), 1.0), Loss("discrete-gaussian", second, 1.0)]
        delta = self.reporting_delta()
        rho = sum(loss.rho() for loss in losses)
        eps, how = zcdp_pair_epsilon(tuple(losses), delta)
        return PrivacyCost(eps, delta, rho, "zcdp", f"(epsilon, delta): {how}; the worst pair of cells of every "
                           "(level, query), composed; invariants published exactly, outside the guarantee",
                           losses=tuple(losses))

    def released_tables(self) -> list[tuple]:
        """One table per (level, query): the measured cells as a flat vector (row order of the table)."""
        from ..mechanisms.discrete_gaussian import DiscreteGaussian

        s = self.structure
        out = []
        for li, lv in enumerate(s.levels):
            for qi, q in enumerate(s.query_names):
                rows, _, _ = s.measured(li, qi)
                if rows.size == 0:
                    continue
                sig, idx = np.unique(s.sigma[rows], return_inverse=True)
                out.append((f"{lv}.{q}", s.noisy[rows], [DiscreteGaussian(float(v)) for v in sig],
                            idx.astype(np.int64), ("cell",)))
        return out

    def to_dict(self) -> dict:
        """The manifest (the measurements as their file name, or as a note of how many rows were given in
        memory: a posterior's ``release_json`` does not carry the table; ``dpposterior.census.save`` writes it)."""
        out = self.model_dump(mode="json", exclude_none=True, exclude={"measurements"})
        out["measurements"] = (self.measurements if isinstance(self.measurements, str)
                               else f"(in memory: {self.structure.M} rows)")
        return out

    def save(self, path) -> None:
        """The manifest and its parquet table beside it (:func:`write_release`)."""
        write_release(self, path)


def release_from(manifest: dict, rows: dict) -> CensusRelease:
    """A validated release from a manifest (as the JSON file holds it, ``measurements`` aside) and its measurement
    columns; its sha256 is of the manifest's canonical JSON and the columns' values."""
    from pydantic import ValidationError

    from ..errors import from_pydantic

    if not isinstance(manifest, dict):
        raise InputError("manifest", "must be a dict (the release's JSON manifest)")
    try:
        release = CensusRelease.model_validate({**manifest, "measurements": dict(rows)})
    except ValidationError as exc:
        raise from_pydantic(exc, "release") from None
    release.after_load(None)
    digest = hashlib.sha256(json.dumps({k: v for k, v in manifest.items() if k != "measurements"},
                                       sort_keys=True).encode())
    for col in COLUMNS:
        digest.update(np.asarray(rows[col]).astype(str if col in ("level", "geocode", "query", "cell") else float)
                      .tobytes())
    release._sha256 = digest.hexdigest()
    release._family_entry = FAMILY
    return release


def write_release(release: "CensusRelease", path) -> Path:
    """Write ``release`` as ``path`` (the JSON manifest) and the parquet table beside it (same name, ``.parquet``),
    each atomically; returns the manifest's path."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..files import atomic_path, write_bytes

    path = Path(path)
    if path.suffix != ".json":
        raise InputError("path", f"{path.name}: the manifest is a .json file")
    s = release.structure
    table_path = path.with_suffix(".parquet")
    geocode = np.empty(s.M, dtype=object)
    for li in range(s.L):
        rows = s.level == li
        geocode[rows] = s.units[li][s.unit[rows]]
    cell = np.empty(s.M, dtype=object)
    for qi, q in enumerate(s.query_names):
        rows = s.query == qi
        cell[rows] = np.asarray(s.cell_labels(q), dtype=object)[s.cell[rows]]
    table = pa.table({"level": pa.array(np.asarray(s.levels, dtype=object)[s.level].astype(str)),
                      "geocode": pa.array(geocode.astype(str)),
                      "query": pa.array(np.asarray(s.query_names, dtype=object)[s.query].astype(str)),
                      "cell": pa.array(cell.astype(str)),
                      "noisy_value": pa.array(s.noisy, pa.int64()), "variance": pa.array(s.variance, pa.float64())})
    with atomic_path(table_path, field="path") as tmp:
        pq.write_table(table, tmp, compression="zstd")
    manifest = release.to_dict()
    manifest["measurements"] = table_path.name
    if isinstance(release.bounds, str):
        # a bounds table is written beside the manifest as the measurements are (the file named was relative to
        # where the release was read)
        bounds_path = path.with_suffix(".bounds.parquet")
        rows = s.bounds.rows(s) if s.bounds is not None else []
        cols = {c: [r.get(c) for r in rows] for c in BOUND_COLUMNS}
        bounds_table = pa.table({c: pa.array(cols[c], pa.int64() if c in ("lower", "upper") else pa.string())
                                 for c in BOUND_COLUMNS})
        with atomic_path(bounds_path, field="path") as tmp:
            pq.write_table(bounds_table, tmp)
        manifest["bounds"] = bounds_path.name
    write_bytes(path, json.dumps(manifest, indent=1) + "\n", field="path")
    return path


@dataclass(frozen=True)
class CensusPrior:
    """The hyperpriors (module docstring); defaults are weakly informative on the scale of census blocks."""

    #: eta_t ~ N(log size_mean, size_sd^2): a tract's typical block-group mean block size
    size_mean: float = 30.0
    size_sd: float = 2.0
    #: tau ~ half-N(0, tau_scale^2): sd of log M_g within a tract
    tau_scale: float = 1.0
    #: log alpha ~ N(log alpha_median, alpha_log_sd^2): negative-binomial shape of block totals
    alpha_median: float = 0.5
    alpha_log_sd: float = 1.5
    #: log beta ~ N(log beta_median, beta_log_sd^2): concentration of a block's mix around its tract's
    beta_median: float = 10.0
    beta_log_sd: float = 1.5
    #: log a ~ N(log mix_shape_median, mix_shape_log_sd^2): the tract mixes' shape (how little a cell's share
    #: varies between tracts, relative to its size)
    mix_shape_median: float = 1.0
    mix_shape_log_sd: float = 1.5
    #: log b ~ N(0, mix_rate_log_sd^2 I) given sum_c log b_c = 0: the rates (a cell's typical share falls with it)
    mix_rate_log_sd: float = 3.0

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def parse_prior(prior: Any, release=None) -> CensusPrior:
    if prior is None:
        return CensusPrior()
    if isinstance(prior, CensusPrior):
        return prior
    if not isinstance(prior, dict):
        raise InputError("prior", f"must be a table of census hyperprior settings (got {shown(prior)})")
    known = {f.name for f in fields(CensusPrior)}
    for k, v in prior.items():
        if k not in known:
            raise InputError(f"prior.{k}", f"unknown setting (one of: {', '.join(sorted(known))})")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise InputError(f"prior.{k}", f"must be a finite number > 0 (got {shown(v)})")
    return CensusPrior(**{k: float(v) for k, v in prior.items()})


def draw_prior(prior: CensusPrior, structure: CensusStructure, rng) -> dict:
    """One draw of every hyperparameter from the prior (for simulation-based calibration).  The tract mixes are
    scaled Dirichlet over the allowed cells (normalised Gamma(a, rate b_c) draws), 0 at structural zeros, as are
    the rates there."""
    T = len(structure.units[_level(structure, "tract")])
    G = len(structure.units[_level(structure, "block_group")])
    tau = abs(rng.normal(0.0, prior.tau_scale))
    eta = rng.normal(math.log(prior.size_mean), prior.size_sd, size=T)
    tract_of_bg = bg_parent(structure)
    log_m = rng.normal(eta[tract_of_bg], tau)
    alpha = float(np.exp(rng.normal(math.log(prior.alpha_median), prior.alpha_log_sd)))
    beta = float(np.exp(rng.normal(math.log(prior.beta_median), prior.beta_log_sd)))
    allowed = structure.allowed_cells
    shape = np.zeros(structure.C)
    rate = np.zeros(structure.C)
    a = float(np.exp(rng.normal(math.log(prior.mix_shape_median), prior.mix_shape_log_sd)))
    shape[allowed] = a
    log_rate = rng.normal(0.0, prior.mix_rate_log_sd, size=allowed.size)
    rate[allowed] = np.exp(log_rate - log_rate.mean())  # iid normals given their sum: the centred vector
    g = rng.gamma(shape[allowed], size=(T, allowed.size)) / rate[allowed]
    mix = np.zeros((T, structure.C))
    mix[:, allowed] = g / g.sum(axis=1, keepdims=True)
    return {"alpha": alpha, "beta": beta, "tau": float(tau), "eta": eta, "block_group_mean": np.exp(log_m)[:G],
            "tract_mix": mix, "mix_shape": a, "mix_rate": rate}


def draw_histograms(theta: dict, structure: CensusStructure, rng) -> np.ndarray:
    """x ~ the model given the hyperparameters ``theta`` (block totals, then each block's mix over the allowed
    cells; structural zeros stay 0)."""
    bg = structure.block_unit[_level(structure, "block_group")]
    tract = structure.block_unit[_level(structure, "tract")]
    alpha, beta = theta["alpha"], theta["beta"]
    mean = theta["block_group_mean"][bg]
    N = rng.negative_binomial(alpha, alpha / (alpha + mean))
    allowed = structure.allowed_cells
    x = np.zeros((structure.B, structure.C), dtype=np.int64)
    for b in range(structure.B):
        if N[b]:
            p = rng.dirichlet(np.maximum(beta * np.asarray(theta["tract_mix"][tract[b]])[allowed], 1e-300))
            x[b, allowed] = rng.multinomial(N[b], p / p.sum())
    return x


def _level(structure: CensusStructure, name: str) -> int:
    """Index of level ``name``; a release without block groups or tracts pools at the nearest level above."""
    order = ("block_group", "tract", "county", "state", "us")
    start = order.index(name)
    for lv in order[start:]:
        if lv in structure.levels:
            return structure.levels.index(lv)
    return structure.levels.index("block")  # blocks only: each block its own group


def bg_parent(structure: CensusStructure) -> np.ndarray:
    """The tract (pooling level above the block group) of every block group."""
    gi, ti = _level(structure, "block_group"), _level(structure, "tract")
    G = len(structure.units[gi])
    out = np.zeros(G, dtype=np.int64)
    out[structure.block_unit[gi]] = structure.block_unit[ti]
    return out


def pooling_levels(structure: CensusStructure) -> tuple[int, int]:
    """(block-group level, tract level) indices used by the prior's pooling."""
    return _level(structure, "block_group"), _level(structure, "tract")


def synthetic_blocks(n: int, state: str = "15") -> list[str]:
    """About ``n`` block GEOIDs of a synthetic geography: 2 counties x 2 tracts x 2 block groups, blocks shared
    out evenly (at least one per block group)."""
    per = max(1, int(round(n / 8)))
    return [f"{state}{c + 1:03d}{t + 1:06d}{g + 1}{b:03d}" for c in range(2) for t in range(2) for g in range(2)
            for b in range(per)]


def simulate(prior, n, epsilon, rng, mechanism=None, rho=None, structural_zeros=None):
    """For ``dpposterior calibrate``: hyperparameters from the prior, block histograms from the model on a
    synthetic geography of about ``n`` blocks (2 x 2 x 2 block groups; a 2 x 3 histogram: age x ethnicity), every
    geounit x query cell measured with the discrete Gaussian; the budget rho (``rho``, else epsilon^2 / 2) split
    equally over the (level, query) pairs, each at sigma^2 = 1 / rho_pair (the production's rule,
    ``census_strategy``).  ``structural_zeros`` (partial cells of that histogram, as the manifest's field): cells
    the model keeps at 0, written into the release.  Returns the truth of alpha, beta, tau and the release."""
    from . import SimulatedRelease
    from ..mechanisms.discrete_gaussian import DiscreteGaussian

    if mechanism not in (None, "discrete-gaussian"):
        raise InputError("mechanism", f"the census simulator releases through the discrete Gaussian (got "
                         f"{shown(mechanism)})")
    if rho is None:
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
            raise InputError("epsilon", f"must be a finite number > 0 (got {shown(epsilon)})")
        rho = 0.5 * float(epsilon) ** 2
    prior = parse_prior(prior)
    attributes = {"age": ["under 18", "18+"], "ethnicity": ["hisp", "nonhisp-white", "other"]}
    queries = {"total": [], "age": ["age"], "ethnicity": ["ethnicity"], "detailed": ["age", "ethnicity"]}
    levels = ["state", "county", "tract", "block_group", "block"]
    blocks = synthetic_blocks(int(n))
    skeleton = build_structure(attributes, queries, levels, {
        "level": ["block"], "geocode": [blocks[0]], "query": ["total"], "cell": [""], "noisy_value": [0],
        "variance": [1.0]}, blocks=blocks, structural_zeros=structural_zeros)
    theta = draw_prior(prior, skeleton, rng)
    x = draw_histograms(theta, skeleton, rng)
    variance = len(levels) * len(queries) / float(rho)
    sigma = float(math.sqrt(variance))
    cols = {k: [] for k in COLUMNS}
    for li, lv in enumerate(levels):
        for qi, q in enumerate(queries):
            agg = skeleton.aggregate(x, li, qi)
            noisy = agg + DiscreteGaussian(sigma).draw(agg.shape, rng)
            U, K = agg.shape
            cols["level"] += [lv] * (U * K)
            cols["geocode"] += np.repeat(skeleton.units[li].astype(str), K).tolist()
            cols["query"] += [q] * (U * K)
            cols["cell"] += skeleton.cell_labels(q) * U
            cols["noisy_value"] += noisy.ravel().astype(int).tolist()
            cols["variance"] += [variance] * (U * K)
    release = release_from({
        "format": "dpposterior-release/1", "family": "census", "attributes": attributes, "queries": queries,
        "levels": levels, "invariants": {"state_total": {"15": int(x.sum())}},
        "strategy": {"name": "equal split", "rho": float(rho)},
        **({"structural_zeros": structural_zeros} if structural_zeros else {})}, cols)
    return SimulatedRelease(theta={"alpha": theta["alpha"], "beta": theta["beta"], "tau": theta["tau"]},
                            release=release, confidential={"counts": x})


def simulated_mechanism(epsilon: float) -> dict:
    """What the simulator's release is, given calibrate's ``--epsilon`` (the result JSON records it)."""
    return {"name": "discrete-gaussian", "epsilon": float(epsilon), "rho": 0.5 * float(epsilon) ** 2,
            "note": "the census simulator reads --epsilon as rho = epsilon^2 / 2, split equally over the (level, "
                    "query) pairs at sigma^2 = 1 / rho_pair"}


def prior_moments(prior, release=None) -> dict:
    """alpha, beta and the mixes' shape log-normal (mean exp(m + s^2/2), sd mean sqrt(exp(s^2) - 1)); tau
    half-normal."""
    prior = parse_prior(prior, release)

    def lognormal(median, s):
        mean = median * math.exp(0.5 * s * s)
        return mean, mean * math.sqrt(math.expm1(s * s))

    return {"alpha": lognormal(prior.alpha_median, prior.alpha_log_sd),
            "beta": lognormal(prior.beta_median, prior.beta_log_sd),
            "mix_shape": lognormal(prior.mix_shape_median, prior.mix_shape_log_sd),
            "tau": (prior.tau_scale * math.sqrt(2.0 / math.pi), prior.tau_scale * math.sqrt(1.0 - 2.0 / math.pi))}


# --------------------------------------------------------------------------- observation model
class MeasuredRows:
    """The M measured cells of the latent block histogram x (B x C): each row's geounit total of its query cell's
    histogram cells (:meth:`CensusStructure.aggregate`, one pass per level and query)."""

    def __init__(self, structure: CensusStructure):
        self.structure = structure
        self.shape = (structure.M,)

    def __call__(self, latent) -> np.ndarray:
        s = self.structure
        out = np.empty(s.M)
        for li in range(s.L):
            for qi in range(s.Q):
                rows = np.flatnonzero((s.level == li) & (s.query == qi))
                if rows.size:
                    out[rows] = s.aggregate(np.asarray(latent), li, qi)[s.unit[rows], s.cell[rows]]
        return out


def _row_laws(structure: CensusStructure) -> tuple[list, np.ndarray]:
    """The discrete Gaussians of the measured rows, one per distinct published sigma, and each row's index."""
    from ..mechanisms.discrete_gaussian import DiscreteGaussian

    distinct, index = np.unique(structure.sigma, return_inverse=True)
    return [DiscreteGaussian(float(sd)) for sd in distinct], index.reshape(-1)


def observation_model(release: CensusRelease, prior=None) -> ObservationModel:
    """The noisy measurement rows as one measurement of the latent block histogram, under the model of the module
    docstring.  Variables as ``da`` stores them: ``alpha``, ``beta``, ``tau``, ``block_group_mean`` (block_group),
    ``tract_mix`` (tract, cell; each tract's row sums to 1), ``mix_shape`` (the tract mixes' a) and ``mix_rate``
    (cell: their b) and ``counts`` (block, cell); ``naive`` packs on the model's marginal of ``counts``."""
    prior = prior if isinstance(prior, CensusPrior) else parse_prior(prior, release)
    s = release.structure
    gi, ti = pooling_levels(s)
    cells = s.cell_labels()
    # each row's discrete Gaussian at its own published sigma
    laws = TableLaws("discrete-gaussian", lambda: _row_laws(s), "measurements", "rows")
    measurement = Measurement("measurements", s.noisy, MeasuredRows(s), laws)
    latent = LatentStatistic(f"the {s.B} x {s.C} block histogram", frozenset({RECORDS, ENUMERATE, SIMULATE}), s)
    variables = (Variable("alpha", (), {}, "positive"), Variable("beta", (), {}, "positive"),
                 Variable("tau", (), {}, "positive"),
                 Variable("block_group_mean", ("block_group",), {"block_group": s.units[gi]}, "positive"),
                 Variable("tract_mix", ("tract", "cell"), {"tract": s.units[ti], "cell": cells}, "unit"),
                 Variable("mix_shape", (), {}, "positive"),
                 Variable("mix_rate", ("cell",), {"cell": cells}, "positive"),
                 Variable("counts", ("block", "cell"), {"block": s.blocks, "cell": cells}, "count"))

    def sample(rng):
        theta = draw_prior(prior, s, rng)
        draw = {k: theta[k] for k in ("alpha", "beta", "tau", "block_group_mean", "tract_mix", "mix_shape",
                                      "mix_rate")}
        draw["counts"] = draw_histograms(theta, s, rng)
        return draw

    return ObservationModel("census", variables,
                            Prior(sample, prior.as_dict(), None,
                                  "negative-binomial block totals, Dirichlet-multinomial mixes, log-normal pooling"),
                            latent, (measurement,))


FAMILY = Family(
    name="census",
    release_model=CensusRelease,
    methods={"da": EngineSpec.of("dpposterior.inference.census_da", "census_da", "CensusDAOptions"),
             "naive": EngineSpec.of("dpposterior.inference.census_da", "census_naive", "CensusNaiveOptions")},
    auto_method="da",
    parse_prior=parse_prior,
    # the naive posterior has no hyperparameters to calibrate: run it by name (--method naive)
    naive_method=None,
    naive_by_default=False,
    description="the Census noisy measurement files: a geographic hierarchy of noisy marginals -> block counts",
    mechanisms=("discrete-gaussian",),
    simulate=simulate,
    simulate_mechanisms=("discrete-gaussian",),
    hooks={"prior_moments": prior_moments, "simulated_mechanism": simulated_mechanism,
           "observation_model": observation_model},
)


#: levels the report draws a caterpillar of, and the most geounits it draws per level (evenly by median)
REPORT_LEVELS = ("county", "tract", "block_group", "block")
REPORT_MAX_UNITS = 150


def report_figures(idata) -> list[tuple]:
    """``dpposterior report``'s figures of a census posterior: a caterpillar of persons per geounit at every level
    (median and 90% HPD interval, geounits sorted by median; at most :data:`REPORT_MAX_UNITS` shown, evenly)."""
    import matplotlib.pyplot as plt

    from ..arviz_compat import group
    from ..geotables import LEVEL_DIGITS, group_sum
    from ..intervals import hpd

    post = group(idata, "posterior")
    counts = post["counts"]
    blocks = np.asarray(counts.coords["block"].values).astype(str)
    chains, draws = counts.sizes["chain"], counts.sizes["draw"]
    totals = np.empty((chains * draws, blocks.size), dtype=np.int64)
    for ch in range(chains):  # a chain at a time: the block draws are the large array
        totals[ch * draws:(ch + 1) * draws] = np.asarray(counts.isel(chain=ch).values).sum(axis=-1)
    levels = REPORT_LEVELS
    fig, axes = plt.subplots(1, len(levels), figsize=(4.2 * len(levels) + 1, 7.5), squeeze=False)
    for ax, lv in zip(axes[0], levels):
        units, idx = np.unique(np.array([b[:LEVEL_DIGITS[lv]] for b in blocks]), return_inverse=True)
        by = totals if lv == "block" else group_sum(totals, idx, len(units), axis=1)
        med = np.quantile(by, 0.5, axis=0, method="inverted_cdf")
        lo, hi = hpd(by, 0.9)
        order = np.argsort(med, kind="stable")
        shown = order[np.linspace(0, len(units) - 1, min(len(units), REPORT_MAX_UNITS)).round().astype(int)]
        y = np.arange(shown.size)
        ax.hlines(y, lo[shown], hi[shown], color="#1f77b4", lw=0.8)
        ax.plot(med[shown], y, "o", ms=2, color="#1f77b4")
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlabel("persons (median, 90% interval)")
        ax.set_title(f"{lv.replace('_', ' ')}: {shown.size} of {len(units):,}" if shown.size < len(units)
                     else f"{lv.replace('_', ' ')}: all {len(units):,}", fontsize=10)
        ax.set_yticks([])
    axes[0][0].set_ylabel("geounits, sorted by posterior median")
    fig.tight_layout()
    caption = ("Persons per geounit at each level: the posterior median (dot) and 90% HPD interval (bar: the "
               "shortest holding 90% of the posterior), "
               "geounits sorted by their median (evenly chosen where there are more than "
               f"{REPORT_MAX_UNITS}). Every level's table of every query: dpposterior tabulate.")
    return [("census_levels", "Persons by level", fig, caption)]


FAMILY.hooks["report_figures"] = report_figures
FAMILY.hooks["report_skip"] = ("counts", "block_group_mean", "tract_mix", "mix_rate")
