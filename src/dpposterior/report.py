"""``dpposterior report``: PNG figures and one self-contained ``report.html``.

For a posterior (ArviZ netCDF written by ``dpposterior infer``):

* marginal densities and a pair plot, with the naive (noise-ignoring) posterior
  overlaid -- recomputed from the release stored in the file's attrs (``release_json``,
  ``prior_json``: see :func:`dpposterior.inference.infer`) when possible, and any
  ``--compare`` posteriors;
* a table of posterior means and 95% HPD intervals (highest-density: the shortest
  interval holding 95% of the draws, never ArviZ 1's default 89% equal-tailed one;
  ``dpposterior.convergence``), with ESS and R-hat for the main posterior;
* trace and rank plots (ArviZ's, through ``dpposterior.arviz_compat``; Vehtari et al. 2021)
  for MCMC engines;
* for a small-area posterior (hundreds or thousands of areas), a caterpillar plot of the area rates
  per cell (sorted by the posterior median, with 90% intervals, the naive ones beside them) instead
  of per-area panels; the per-variable table, densities and trace plots keep the shared parameters
  (``alpha``, ``tau``, ``tau_parent``);
* the feasible region when the data are bounded: for the Gaussian family the
  region of Kazan & Reiter (2024) Theorem 2, sigma^2 <= (mu - a)(b - mu) for data in
  [a, b] (Corollary 1: sigma^2 <= (b - a)^2 / 4), with the share of draws outside it.
  (Theorem 3 bounds the latent (Ybar, S^2) pair, which the posterior files do not store.)

For a calibration result (the JSON of ``dpposterior calibrate``): the table of KS
statistics and coverages, and the rank ECDF of every method minus the uniform CDF
with its 95% *simultaneous* confidence band (Saeilynoja, Buerkner & Vehtari 2022,
computed by simulation in :func:`rank_ecdf_band`): a calibrated method stays inside
the band over the whole curve with probability 0.95.

Every image is written as a PNG beside ``report.html`` and embedded in it as
base64, so the HTML file can be mailed or archived on its own.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# engines that draw iid samples (no trace/rank diagnostics needed): the one list is dpposterior.checks'
from .arviz_compat import group as _group
from .arviz_compat import group_names, plot_kde, rank_caption, rank_figure, read_netcdf, root_attrs, trace_figure
from .console import constrainable, registered_family
from .errors import InputError

MAX_DENSITY_PANELS = 16
#: a comparison density whose 99.8% range is below this fraction of the plotted range is drawn as a line
SPIKE_FRACTION = 0.02
MAX_PAIR_COMPONENTS = 4
#: draws per posterior shown in scatter plots (thinned evenly; densities use every draw)
MAX_SCATTER = 3000
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
HDI_PROB = 0.95
#: per-area variables of a small-area posterior: drawn as caterpillars, kept out of the per-variable panels
AREA_VARIABLES = ("rate", "u", "v")
#: at most this many areas per caterpillar panel (evenly spaced in the sorted order beyond it)
MAX_CATERPILLAR_AREAS = 1000
CATERPILLAR_PROB = 0.90


@dataclass
class Loaded:
    """One posterior to show: a label and its scalar components, each of shape (chain, draw)."""

    label: str
    idata: Any
    components: dict[str, np.ndarray]
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def method(self) -> str:
        return str(self.attrs.get("method", "?"))


@dataclass
class Figure:
    name: str
    title: str
    png: bytes
    caption: str = ""


# ------------------------------------------------------------------------------ entry point

def write_report(posterior_path, out_dir, compare=None, geometry=None, geometry_key: str | None = None) -> Path:
    """Write the figures and ``report.html`` for ``posterior_path`` into ``out_dir``; return the HTML path.
    ``geometry``: a GeoJSON file of the areas' outlines (small-area posteriors), drawn as maps of the rates;
    ``geometry_key``: the feature property that holds the area ids (default: :mod:`dpposterior.geometry`)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    path = _existing(posterior_path, "posterior")
    compare = [_existing(p, "compare") for p in (compare or [])]
    if geometry_key is not None and geometry is None:
        raise InputError("geometry-key", "names the area property of a --geometry file; give --geometry FILE")
    if geometry is not None:
        geometry = _existing(geometry, "geometry")
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError("out", f"cannot create folder {out_dir} ({exc.strerror})") from None
    with warnings.catch_warnings():
        # ArviZ 0.23 calls a matplotlib API deprecated in 3.11: noise for the user, not our problem
        warnings.filterwarnings("ignore", category=matplotlib.MatplotlibDeprecationWarning)
        if path.suffix.lower() == ".json":
            if compare:
                raise InputError("compare", "only posteriors (netCDF) can be compared, not calibration results")
            if geometry is not None:
                raise InputError("geometry", "maps are drawn for a small-area posterior, not a calibration result")
            title, sections = _calibration_sections(path)
        else:
            title, sections = _posterior_sections(path, compare, geometry, geometry_key)
    from .files import write_bytes

    figures = [s for s in sections if isinstance(s, Figure)]
    for fig in figures:
        write_bytes(out_dir / f"{fig.name}.png", fig.png, field="out")
    html_path = out_dir / "report.html"
    write_bytes(html_path, _html(title, sections), field="out")
    return html_path


def _existing(p, field_name: str) -> Path:
    path = Path(p)
    if not path.exists():
        raise InputError(field_name, f"file not found: {path}")
    if not path.is_file():
        raise InputError(field_name, f"not a file: {path}")
    return path


# ------------------------------------------------------------------------------ loading

def load_posterior(path: Path, field_name: str = "posterior"):
    """ArviZ InferenceData from a netCDF file, or a one-line InputError."""
    try:
        idata = read_netcdf(path)
    except Exception as exc:  # h5netcdf/xarray raise many kinds (OSError, ValueError, KeyError...)
        raise InputError(field_name, f"cannot read {path} as an ArviZ netCDF posterior "
                                     f"({type(exc).__name__})") from None
    if "posterior" not in group_names(idata) or not _group(idata, "posterior").data_vars:
        raise InputError(field_name, f"{path} has no posterior group")
    from .checks import is_padding

    for name, var in _group(idata, "posterior").data_vars.items():
        values = np.asarray(var.values)
        if values.dtype.kind in "fc" and not _all_finite(values) and not is_padding(values):
            bad = int((~np.isfinite(values)).sum())
            raise InputError(field_name, f"{path}: {bad} of {values.size} draws of {name} are not finite (NaN or "
                             "infinite); a report of them would be meaningless")
    sealed = root_attrs(idata).get("draws_sha256")
    if sealed is not None:  # written by current versions (older files have no seal)
        from .posterior import draws_sha256

        if str(sealed) != draws_sha256({k: v.values for k, v in _group(idata, "posterior").data_vars.items()}):
            raise InputError(field_name, f"{path}: its draws do not match their sha256 (edited or corrupted after "
                                         "dpposterior wrote them)")
    return idata


def _all_finite(values: np.ndarray, block: int = 1 << 22) -> bool:
    """np.isfinite(values).all() a block at a time (no array-sized temporary)."""
    flat = values.reshape(-1)
    return all(np.isfinite(flat[k:k + block]).all() for k in range(0, flat.size, block))


def components(idata, max_components: int | None = None, skip=()) -> dict[str, np.ndarray]:
    """Scalar components ``label -> (chain, draw)`` of every posterior variable (but those in ``skip``),
    e.g. ``theta[x1]``."""
    out: dict[str, np.ndarray] = {}
    for name, da in _group(idata, "posterior").data_vars.items():
        if name in skip:
            continue
        event_dims = [d for d in da.dims if d not in ("chain", "draw")]
        values = da.transpose("chain", "draw", *event_dims).values
        if values.dtype.kind not in "fiub":
            continue
        if not event_dims:
            out[str(name)] = values.astype(float)
            continue
        coords = [list(da.coords[d].values) if d in da.coords else list(range(da.sizes[d])) for d in event_dims]
        for index in np.ndindex(*values.shape[2:]):
            label = ",".join(str(coords[k][i]) for k, i in enumerate(index))
            component = values[(slice(None), slice(None), *index)].astype(float)
            if np.isnan(component).all():
                continue  # padding of a ragged variable (naive-bayes levels), not a parameter
            out[f"{name}[{label}]"] = component
            if max_components and len(out) >= max_components:
                return out
        if max_components and len(out) >= max_components:
            return out
    return out


def _attrs(idata) -> dict[str, Any]:
    attrs = root_attrs(idata)
    attrs.update(dict(_group(idata, "posterior").attrs))
    return attrs


def _label(attrs: dict, fallback: str) -> str:
    method = attrs.get("method")
    if method is None:
        return fallback
    label = str(method)
    constrained = str(attrs.get("constrained", "")).lower()
    if constrained in ("1", "true"):
        label += " (constrained)"
    elif constrained in ("0", "false") and constrainable(attrs.get("family")):
        label += " (unconstrained)"  # families where both analyses exist side by side
    return label


def _release_of(attrs: dict) -> dict | None:
    text = attrs.get("release_json")
    if not isinstance(text, str):
        return None
    stated = attrs.get("release_json_sha256")
    if stated is not None:  # written by current versions of infer; older files cannot be checked
        import hashlib

        if hashlib.sha256(text.encode()).hexdigest() != str(stated):
            raise InputError("posterior", "its release_json attribute was edited after infer wrote it (its sha256 "
                             "no longer matches release_json_sha256): the naive overlay and feasible region would "
                             f"come from another release than the one (sha256 {attrs.get('release_sha256', '?')}) "
                             "the posterior was computed from")
    try:
        release = json.loads(text)
    except json.JSONDecodeError:
        return None
    return release if isinstance(release, dict) else None


def naive_from_release(attrs: dict) -> tuple[Any | None, str]:
    """The naive posterior recomputed from the release in ``attrs``, or (None, why not)."""
    release = _release_of(attrs)
    if release is None:
        return None, "the file does not carry its release (pass the naive posterior with --compare)"
    try:
        prior = json.loads(attrs.get("prior_json", "null"))
    except (TypeError, json.JSONDecodeError):
        return None, "the file's prior is not plain data (pass the naive posterior with --compare)"
    from .api import naive_companion

    kwargs = {}
    for name in ("draws", "chains"):
        value = attrs.get(f"options_{name}")
        if value is not None:
            kwargs[name] = int(value)
    if "constrained" in attrs:
        kwargs["constrained"] = str(attrs["constrained"]) in ("1", "True", "true")
    seed = attrs.get("seed")
    too_big = _small_area_rerun_too_big(release, attrs)
    if too_big:
        return None, too_big
    _say_if_expensive(release)
    try:
        post, why = naive_companion(release, prior, main_method=attrs.get("method"),
                                    seed=int(seed) if seed is not None else 0, **kwargs)
    except InputError as exc:
        if exc.field == "release.family":
            return None, str(exc)
        return None, f"the naive method refused this release ({exc})"
    except Exception as exc:  # a convenience overlay: report why it is missing, keep the report
        return None, f"recomputing it failed ({type(exc).__name__}: {exc})"
    if post is None:
        return None, why
    return post.to_arviz(), ""


#: the most cell-iterations (areas x cells x chains x (warm-up + draws)) for which report recomputes a
#: small-area naive posterior itself: about 10 s of sampling on one core; beyond, pass one with --compare
NAIVE_RERUN_MAX_CELL_ITERATIONS = 100_000_000


def _small_area_rerun_too_big(release: dict, attrs: dict) -> str:
    """Why report does not rerun the small-area sampler for the naive overlay ("" when it does): at tens of
    thousands of areas that is as long as ``infer`` was."""
    family = registered_family(release.get("family"))
    if family is None or not family.areal:
        return ""
    try:
        cells = len(release["areas"]) * len(release["cells"])
        chains = int(attrs.get("options_chains", 4))
        iterations = int(attrs.get("options_draws", 0)) + int(attrs.get("options_warmup", 0))
    except (KeyError, TypeError, ValueError):
        return ""
    work = cells * chains * iterations
    if work <= NAIVE_RERUN_MAX_CELL_ITERATIONS:
        return ""
    return (f"recomputing it would rerun the sampler over {cells:,} cells x {chains} chains x {iterations:,} "
            "iterations (about as long as infer took); compute it once with dpposterior infer --method naive "
            "and pass it with --compare")


def _say_if_expensive(release: dict) -> None:
    """Say on stderr, before it starts, that the naive overlay trains a flow (the simulator families,
    where ``infer`` computes it only on request): a minute of silence otherwise."""
    from .families import get_family

    try:
        family = get_family(release.get("family"))
    except InputError:
        return
    if not family.naive_by_default:
        print(f"report: recomputing the naive (noise-ignoring) posterior of this {family.name} release, method "
              f"{family.naive_method}: it trains a flow (about a minute on 2 cores); pass one with --compare to "
              "skip this", file=sys.stderr)


# ------------------------------------------------------------------------------ posterior report

def _iid(attrs: dict) -> bool:
    """Whether a posterior file's draws are independent (its ``iid_draws`` attribute, set by the engine)."""
    try:
        return bool(int(attrs.get("iid_draws", 0)))
    except (TypeError, ValueError):
        return False


def _posterior_sections(path: Path, compare: list[Path], geometry: Path | None = None,
                        geometry_key: str | None = None):
    """(title, sections) of a posterior's report; the files read are closed when the sections are built."""
    from .arviz_compat import close

    opened: list = []
    try:
        return _build_posterior_sections(path, compare, geometry, geometry_key, opened)
    finally:
        for data in opened:
            close(data)


def _build_posterior_sections(path: Path, compare: list[Path], geometry: Path | None, geometry_key: str | None,
                              opened: list):
    from . import progress

    progress.status("reading the posterior")
    main_idata = load_posterior(path)
    opened.append(main_idata)
    main_attrs = _attrs(main_idata)
    family = str(main_attrs.get("family", "?"))
    registered = registered_family(family)
    areal = registered is not None and registered.areal
    outlines = None
    if geometry is not None:  # before any long work: a file that matches no area is refused at once
        if not areal or "area" not in _group(main_idata, "posterior").coords:
            raise InputError("geometry", f"maps are drawn for a small-area posterior; {path} is of family {family!r}")
        from .geometry import match_areas, read_geojson

        areas = [str(a) for a in _group(main_idata, "posterior").coords["area"].values]
        outlines = (areas, *match_areas(areas, read_geojson(geometry), geometry_key), geometry)
    # a small-area posterior has a rate per area and cell: those go to the caterpillar, not one panel each; a
    # family that draws its own figures (report_figures) names the variables they cover (report_skip)
    own_figures = registered.hooks.get("report_figures") if registered is not None else None
    skip = AREA_VARIABLES if areal else tuple(registered.hooks.get("report_skip", ())) if own_figures else ()
    main = Loaded(_label(main_attrs, path.stem), main_idata, components(main_idata, skip=skip), main_attrs)
    others: list[Loaded] = []
    notes: list[str] = []
    for p in compare:
        idata = load_posterior(p, "compare")
        opened.append(idata)
        attrs = _attrs(idata)
        _check_belongs(main_attrs, attrs, path, p)
        others.append(Loaded(_label(attrs, p.stem), idata, components(idata, skip=skip), attrs))
    if own_figures is not None and not others:
        notes.append("Naive posterior not shown: pass one with --compare (dpposterior infer --method naive).")
    elif not any(o.method in ("naive", "non-private") for o in others):
        progress.status("recomputing the naive posterior from the release")
        naive_idata, why = naive_from_release(main_attrs)
        if naive_idata is not None:
            attrs = _attrs(naive_idata)
            others.insert(0, Loaded("naive (noise ignored; recomputed)", naive_idata,
                                    components(naive_idata, skip=skip), attrs))
        elif why:
            notes.append(f"Naive posterior not shown: {why}.")
    labels = [main.label]
    for o in others:  # distinct labels for the legend
        while o.label in labels:
            o.label += "'"
        labels.append(o.label)

    release = _release_of(main_attrs)
    sections: list[Any] = []
    main_sizes = _group(main_idata, "posterior").sizes
    meta = [("file", str(path)), ("family", family), ("method", main.method),
            ("chains x draws", f"{main_sizes['chain']} x {main_sizes['draw']}")]
    for key, words in RUN_ATTRIBUTES:
        if key in main_attrs and _applies(key, main_attrs):
            meta.append((words, _attr_words(key, main_attrs[key])))
    sections.append(("table", "Run", ["", ""], meta))
    flagged = str(main_attrs.get("warnings", "none"))
    if flagged not in ("none", ""):
        sections.extend(("note", f"Warning: {w}") for w in flagged.split(" | "))
    sections.extend(("note", n) for n in notes)
    progress.status("figures")
    if own_figures is not None:
        for name, title, fig, caption in own_figures(main_idata):
            sections.append(Figure(name, title, _png(fig), caption))
        if skip:
            sections.append(("note", "The table, densities and trace plots below show the shared parameters; "
                                     + ", ".join(skip) + " are in the figures above and in the posterior file."))
    elif skip:
        sections.append(_caterpillar_figure(main, others))
        if outlines is not None:
            sections.append(_choropleth_figure(main, *outlines))
        sections.append(("note", "The table, densities and trace plots below show the shared parameters; the "
                                 "per-area variables (" + ", ".join(v for v in AREA_VARIABLES
                                                                    if v in _group(main_idata, "posterior")) +
                                 ") are in the caterpillar plot above and in the posterior file."))
    sections.append(("table", f"Posterior means and {HDI_PROB:.0%} HPD intervals", *_hpd_table(main, others)))
    sections.append(_density_figure(main, others))
    pair = _pair_figure(main, others)
    if pair is not None:
        sections.append(pair)
    feasible = _feasible_figure(main, others, release)
    if feasible is not None:
        sections.append(feasible)
    if "junction_tree" in main_attrs and release is not None:
        sections.extend(_table_marginal_figures(main, others, release))
    if not _iid(main.attrs):
        var_names = [v for v in _first_vars(main_idata, 4 + len(skip)) if v not in skip][:4]
        sections.append(_arviz_figure(
            "trace", "Trace plot (MCMC)", lambda: trace_figure(main_idata, var_names),
            "Left: per-chain densities; right: draws in iteration order. Chains should overlap and look "
            "like stationary noise."))
        if _group(main_idata, "posterior").sizes["chain"] >= 2:
            sections.append(_arviz_figure(
                "rank", "Rank plot (MCMC)", lambda: rank_figure(main_idata, var_names), rank_caption()))
    if "posterior_predictive" in group_names(main_idata):
        pp = _predictive_figure(main_idata, release)
        if pp is not None:
            sections.append(pp)
    return f"dpposterior report: {family} posterior ({main.label})", sections


def _area_draws(loaded: Loaded, var: str) -> tuple[np.ndarray, list] | None:
    """(draws as (samples, area, cell), cell labels) of a per-area variable, or None when absent."""
    post = _group(loaded.idata, "posterior")
    if var not in post:
        return None
    da = post[var]
    cell_dims = [d for d in da.dims if d not in ("chain", "draw", "area")]
    values = da.transpose("chain", "draw", "area", *cell_dims).values
    values = values.reshape(-1, values.shape[2], int(np.prod(values.shape[3:], dtype=int)))
    cells = [str(c) for c in da.coords[cell_dims[0]].values] if cell_dims else [""]
    return values, cells


def _area_names(loaded: Loaded, count: int) -> list[str]:
    """The area ids of a small-area posterior (its ``area`` coordinate), or 1..G when it has none."""
    post = _group(loaded.idata, "posterior")
    if "area" in post.coords and post.sizes.get("area") == count:
        return [str(a) for a in post.coords["area"].values]
    return [str(k + 1) for k in range(count)]


def _rate_unit(var: str, medians: np.ndarray) -> tuple[float, str]:
    """The display unit of ``var``'s values: rates per 1,000 / 100,000 when small (:mod:`dpposterior.units`);
    area effects (``u``, on the log scale) as they are."""
    from .units import rate_unit

    return rate_unit(medians) if var == "rate" else (1.0, "")


#: at most this many area names on a caterpillar's axis; beyond, every k-th area is named
MAX_AREA_LABELS = 100


def _median_by_blocks(draws: np.ndarray, block: int = 4096) -> np.ndarray:
    """Each column's median of (samples, areas) draws, a block of areas at a time (np.median copies its input:
    at 50,000 areas x 4,000 draws a whole copy would be 0.8 GB)."""
    # (each block transposed to rows first: a median along contiguous rows is several times faster than
    # down strided columns)
    return np.concatenate([np.median(np.ascontiguousarray(draws[:, k:k + block].T), axis=1)
                           for k in range(0, draws.shape[1], block)])


def _caterpillar_figure(main: Loaded, others: list[Loaded]) -> Figure:
    """Small-area: every area's rate per cell, sorted by its posterior median, with 90% intervals; areas on
    the vertical axis, named by their ids (every k-th when there are too many to read)."""
    import matplotlib.pyplot as plt

    from .units import unit_label

    var = "rate" if "rate" in _group(main.idata, "posterior") else "u"
    draws, cells = _area_draws(main, var)
    lo_q, hi_q = 0.5 - CATERPILLAR_PROB / 2, 0.5 + CATERPILLAR_PROB / 2
    G = draws.shape[1]
    names = _area_names(main, G)
    shown = min(G, MAX_CATERPILLAR_AREAS)
    medians = [_median_by_blocks(draws[:, :, c]) for c in range(len(cells))]
    factor, words = _rate_unit(var, np.concatenate(medians))
    every = max(1, math.ceil(shown / MAX_AREA_LABELS))
    height = float(np.clip(0.15 * min(shown, MAX_AREA_LABELS * 2) + 1.6, 4.0, 20.0))
    fig, axes = plt.subplots(1, len(cells), figsize=(min(5.2 * len(cells), 20) + 1.2, height), squeeze=False)
    for c, (ax, cell) in enumerate(zip(axes[0], cells)):
        order = np.argsort(medians[c], kind="stable")
        order = order[np.linspace(0, G - 1, shown).round().astype(int)]
        y = np.arange(shown)
        for k, post in enumerate([main, *others]):
            got = draws if k == 0 else _area_draws(post, var)
            if got is None or (k > 0 and got[0].shape[1:] != draws.shape[1:]):
                continue
            d = (got if k == 0 else got[0])[:, order, c] * factor
            off = -0.3 * k if shown <= 200 else 0.0
            color = COLORS[k % len(COLORS)]
            lo, hi = np.quantile(d, [lo_q, hi_q], axis=0)
            ax.hlines(y + off, lo, hi, color=color, lw=0.9 if k == 0 else 0.7, alpha=0.8 if k == 0 else 0.55)
            ax.plot(np.median(d, axis=0), y + off, "o", ms=2.2, color=color, label=post.label)
        ticks = y[::every]
        ax.set_yticks(ticks)
        ax.set_yticklabels([names[i] for i in order[ticks]], fontsize=7 if shown > 30 else 8)
        ax.set_ylim(-1, shown)
        ax.set_xlabel(unit_label(f"{var}[{cell}]" if cell else var, words))
        ax.set_title(f"{var}, cell {cell}" if cell else var, fontsize=10)
        if c == 0:
            ax.set_ylabel(f"area, sorted by the posterior median of {main.label}"
                          + (f" ({shown} of {G} evenly)" if shown < G else ""))
            ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    what = 'every area' if shown == G else f'{shown} of the {G} areas'
    caption = (f"Caterpillar plot: the posterior median (dot) and central {CATERPILLAR_PROB:.0%} interval (bar) of "
               f"{what}'s {unit_label(var, words)} in each cell, areas sorted by the median of {main.label}.")
    if every > 1:
        nth = {2: "2nd", 3: "3rd"}.get(every, f"{every}th")
        caption += (f" Too many areas to name each: every {nth} area shown is named on the vertical axis "
                    f"({len(range(0, shown, every))} names).")
    if words:
        caption += f" The file stores the rates themselves; here they are shown {words}."
    if var == "u":
        caption += " The rates were not stored (too many draws x areas x cells), so the area effects u are shown."
    if others:
        caption += " Comparison posteriors (e.g. the naive one) are drawn beside each area in their own colour."
    return Figure("caterpillar", f"Area {'rates' if var == 'rate' else 'effects'}", _png(fig), caption)


def _choropleth_figure(main: Loaded, areas: list[str], rings: dict, key: str, others: list, path: Path) -> Figure:
    """Small-area maps: each area's posterior median and the width of its central 90% interval, per cell."""
    import matplotlib.pyplot as plt

    from .geometry import FEATURE_ID, draw_choropleth
    from .units import unit_label

    var = "rate" if "rate" in _group(main.idata, "posterior") else "u"
    draws, cells = _area_draws(main, var)
    lo_q, hi_q = 0.5 - CATERPILLAR_PROB / 2, 0.5 + CATERPILLAR_PROB / 2
    medians = [_median_by_blocks(draws[:, :, c]) for c in range(len(cells))]
    factor, words = _rate_unit(var, np.concatenate(medians))
    fig, axes = plt.subplots(len(cells), 2, figsize=(12, 3.4 * len(cells)), squeeze=False)
    for c, cell in enumerate(cells):
        d = draws[:, :, c]
        lo = np.concatenate([np.quantile(d[:, k:k + 4096], lo_q, axis=0) for k in range(0, d.shape[1], 4096)])
        hi = np.concatenate([np.quantile(d[:, k:k + 4096], hi_q, axis=0) for k in range(0, d.shape[1], 4096)])
        name = f"{var}[{cell}]" if cell else var
        draw_choropleth(axes[c, 0], rings, medians[c] * factor, others, "viridis",
                        unit_label(f"median {name}", words))
        axes[c, 0].set_title(f"posterior median, {name}", fontsize=10)
        draw_choropleth(axes[c, 1], rings, (hi - lo) * factor, others, "magma_r",
                        unit_label(f"width of the {CATERPILLAR_PROB:.0%} interval", words))
        axes[c, 1].set_title(f"width of the central {CATERPILLAR_PROB:.0%} interval, {name}", fontsize=10)
    fig.tight_layout()
    missing = len(areas) - len(rings)
    by = "the feature id" if key == FEATURE_ID else f"property {key!r}"
    caption = (f"Maps of {unit_label(var, words)} ({main.label}): the posterior median (left) and the width of "
               f"the central {CATERPILLAR_PROB:.0%} interval (right) of each area, outlines from {path.name} "
               f"matched by {by}. {len(rings)} of {len(areas)} areas drawn"
               + (f"; {missing} area{'s have' if missing != 1 else ' has'} no shape in the file" if missing else "")
               + (f"; {len(others)} outline{'s' if len(others) != 1 else ''} of no area in grey" if others else "")
               + ".")
    if words:
        caption += f" The file stores the rates themselves; here they are shown {words}."
    return Figure("map", "Maps of the area " + ("rates" if var == "rate" else "effects"), _png(fig), caption)


def _check_belongs(main: dict, other: dict, main_path: Path, other_path: Path) -> None:
    """Refuse a ``--compare`` posterior that does not belong beside the main one: another family or
    model (its columns would be empty without a word), or another release (a different question)."""
    for key, what in (("family", "family"), ("model", "model")):
        a, b = main.get(key), other.get(key)
        if a is not None and b is not None and str(a) != str(b):
            raise InputError("compare", f"{other_path} is a posterior of {what} {str(b)!r}, {main_path} of {what} "
                             f"{str(a)!r}: they have no parameters in common to compare")
    a, b = main.get("release_sha256"), other.get("release_sha256")
    if a is not None and b is not None and str(a) != str(b):
        raise InputError("compare", f"{other_path} was computed from another release (sha256 {str(b)[:12]}...) than "
                         f"{main_path} ({str(a)[:12]}...): compare posteriors of the same release")


#: run attributes shown in the report's "Run" table: (netCDF attribute, words)
RUN_ATTRIBUTES = [("prior", "prior"), ("constrained", "constrained to the release's bounds"), ("seed", "seed"),
                  ("options_warmup", "warm-up iterations per chain"),
                  ("release_rho", "release: total rho (zCDP, the curator's budget)"),
                  ("release_epsilon", "release: total epsilon"), ("release_delta", "release: total delta"),
                  ("release_privacy", "release: privacy statement and the accountant that gave epsilon"),
                  ("release_sha256", "release file sha256"),
                  ("dpposterior_version", "dpposterior version")]


def _applies(key: str, attrs: dict) -> bool:
    """Whether a run attribute means something for this posterior: warm-up only for MCMC (not iid draws),
    'constrained' only for the families whose engines can restrict to the release's bounds."""
    if key == "options_warmup":
        return not _iid(attrs)
    if key == "constrained":
        return constrainable(attrs.get("family"))
    return True


def _attr_words(key: str, value) -> str:
    """A netCDF attribute as words (booleans are stored as 0/1 in netCDF)."""
    if key == "constrained":
        try:
            return "yes" if int(value) else "no"
        except (TypeError, ValueError):
            return str(value)
    if key == "release_delta":
        try:
            return "0 (pure epsilon-DP)" if float(value) == 0 else f"{float(value):g}"
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, (float, np.floating)):
        return f"{float(value):g}"
    return str(value)


def _first_vars(idata, k: int) -> list[str]:
    return [str(v) for v in list(_group(idata, "posterior").data_vars)[:k]]


def _hpd_table(main: Loaded, others: list[Loaded]):
    """Means, 95% HPD intervals and (MCMC with 2+ chains) bulk ESS and R-hat of every component shown,
    all components of a posterior at once (:mod:`dpposterior.convergence`: ArviZ's numbers to rounding)."""
    from .convergence import diagnose, hdi_rows

    header = ["variable", f"{main.label}: mean", f"{HDI_PROB:.0%} HPD"]
    diag = _group(main.idata, "posterior").sizes["chain"] >= 2
    if diag:
        header += ["ESS (bulk)", "R-hat"]
    for o in others:
        header += [f"{o.label}: mean", f"{HDI_PROB:.0%} HPD"]

    def stats(post: Loaded, labels: list[str], with_diag: bool):
        if not labels:
            return {}
        arr = np.stack([post.components[label] for label in labels], axis=-1)  # (chain, draw, K)
        lo, hi = hdi_rows(arr.reshape(-1, len(labels)).T, HDI_PROB)
        mean = arr.mean(axis=(0, 1))
        d = diagnose(arr, ("ess_bulk", "rhat")) if with_diag else None
        return {label: (mean[k], lo[k], hi[k], *((d["ess_bulk"][k], d["rhat"][k]) if d else ()))
                for k, label in enumerate(labels)}

    main_stats = stats(main, list(main.components), diag)
    other_stats = [stats(o, [label for label in main.components if label in o.components], False) for o in others]
    rows = []
    for label in main.components:
        mean, lo, hi, *d = main_stats[label]
        row = [label, _fmt(mean), f"[{_fmt(lo)}, {_fmt(hi)}]"]
        if diag:
            row += [_fmt(d[0]), f"{d[1]:.3f}"]
        for o in other_stats:
            if label in o:
                omean, olo, ohi = o[label]
                row += [_fmt(omean), f"[{_fmt(olo)}, {_fmt(ohi)}]"]
            else:
                row += ["", ""]
        rows.append(row)
    return header, rows


def _fmt(x) -> str:
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    return f"{x:.4g}"


def _density_figure(main: Loaded, others: list[Loaded]) -> Figure:
    import matplotlib.pyplot as plt

    labels = list(main.components)[:MAX_DENSITY_PANELS]
    ncols = min(3, len(labels))
    nrows = math.ceil(len(labels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.0 * nrows), squeeze=False)
    spikes = False
    for ax, label in zip(axes.flat, labels):
        main_draws = main.components[label].reshape(-1)
        lo, hi = np.quantile(main_draws, [0.001, 0.999])
        pad = 0.15 * (hi - lo) if hi > lo else max(abs(lo), 1.0) * 0.05
        view = (lo - pad, hi + pad)
        for k, post in enumerate([main, *others]):
            if label not in post.components:
                continue
            x = post.components[label].reshape(-1)
            style = {"color": COLORS[k % len(COLORS)], "linewidth": 2 if k == 0 else 1.4,
                     "linestyle": "-" if k == 0 else "--"}
            name = post.label if ax is axes.flat[0] else None
            width = np.ptp(np.quantile(x, [0.001, 0.999]))
            if k > 0 and width < SPIKE_FRACTION * (view[1] - view[0]):
                # a comparison far narrower than the noise-aware density would flatten it to nothing
                # on a shared density axis: draw it as a vertical line at its mean instead
                ax.axvline(float(np.mean(x)), label=name, **style)
                spikes = True
                continue
            plot_kde(x, ax, label=name, **style)
        ax.set_xlim(*view)
        ax.set_title(label)
        ax.set_xlabel(label)
        ax.set_ylabel("density")
        ax.set_yticks([])
        if ax.get_legend() is not None:  # one shared legend below the panels instead
            ax.get_legend().remove()
    for ax in list(axes.flat)[len(labels):]:
        ax.axis("off")
    handles, names = axes.flat[0].get_legend_handles_labels()
    if names:
        fig.legend(handles, names, loc="lower center", ncol=min(3, len(names)), frameon=False)
    fig.tight_layout(rect=(0, 0.07 if names else 0, 1, 1))
    caption = ("Marginal posterior densities (kernel density estimates); x axis: the parameter's value, "
               "scaled to the noise-aware posterior (0.1%-99.9% quantiles).")
    if spikes:
        caption += (" A vertical line marks a comparison posterior (e.g. the naive one) so much narrower "
                    "that its density would flatten the noise-aware one: the line is at its mean.")
    if len(main.components) > len(labels):
        caption += f" First {len(labels)} of {len(main.components)} components."
    return Figure("marginals", "Marginal densities", _png(fig), caption)


def _thin(x: np.ndarray) -> np.ndarray:
    x = x.reshape(-1)
    step = max(1, len(x) // MAX_SCATTER)
    return x[::step]


def _pair_figure(main: Loaded, others: list[Loaded]) -> Figure | None:
    import matplotlib.pyplot as plt

    labels = list(main.components)[:MAX_PAIR_COMPONENTS]
    if len(labels) < 2:
        return None
    k = len(labels)
    fig, axes = plt.subplots(k, k, figsize=(2.6 * k + 1, 2.6 * k + 1), squeeze=False)
    posts = [main, *others]
    for i, yl in enumerate(labels):
        for j, xl in enumerate(labels):
            ax = axes[i, j]
            if j > i:
                ax.axis("off")
                continue
            for c, post in enumerate(posts):
                if xl not in post.components or yl not in post.components:
                    continue
                color = COLORS[c % len(COLORS)]
                if i == j:
                    plot_kde(post.components[xl].reshape(-1), ax, color=color, linestyle="-" if c == 0 else "--")
                else:
                    ax.scatter(_thin(post.components[xl]), _thin(post.components[yl]), s=2,
                               alpha=0.25 if c == 0 else 0.15, color=color, rasterized=True,
                               label=post.label if (i, j) == (1, 0) else None)
            if i == k - 1:
                ax.set_xlabel(xl)
            if j == 0 and i != j:
                ax.set_ylabel(yl)
            if i == j:
                ax.set_yticks([])
    handles, names = axes[1, 0].get_legend_handles_labels()
    fig.tight_layout()
    if names:  # in the empty upper-right panel, clear of the plots
        legend = axes[0, k - 1].legend(handles, names, loc="center", frameon=False, fontsize=8)
        for handle in legend.legend_handles:
            handle.set_sizes([30])
            handle.set_alpha(0.9)
    caption = "Pair plot: joint draws (lower triangle) and marginal densities (diagonal)."
    if len(main.components) > k:
        caption += f" First {k} of {len(main.components)} components."
    return Figure("pair", "Pair plot", _png(fig), caption)


def _feasible_figure(main: Loaded, others: list[Loaded], release: dict | None) -> Figure | None:
    """The (mu, sigma^2) feasible region for bounded Gaussian data (Kazan & Reiter Theorem 2), where the
    family bounds sigma^2 given mu (its ``feasible_sigma2_max`` hook)."""
    import matplotlib.pyplot as plt

    family = registered_family(main.attrs.get("family"))
    sigma2_max = family.hooks.get("feasible_sigma2_max") if family is not None else None
    if sigma2_max is None or release is None or "bounds" not in release:
        return None
    if "mu" not in main.components or "sigma2" not in main.components:
        return None
    a, b = (float(v) for v in release["bounds"])
    fig, ax = plt.subplots(figsize=(7, 5))
    grid = np.linspace(a, b, 400)
    ax.fill_between(grid, 0, sigma2_max(grid, (a, b)), color="0.85",
                    label="feasible region (Theorem 2)")
    rows = []
    for c, post in enumerate([main, *others]):
        if "mu" not in post.components or "sigma2" not in post.components:
            continue
        mu, s2 = post.components["mu"].reshape(-1), post.components["sigma2"].reshape(-1)
        limit = sigma2_max(mu, (a, b))
        outside = float(np.mean(~(s2 <= limit)))  # NaN limit (mu outside [a, b]) counts as outside
        rows.append((post.label, outside))
        ax.scatter(_thin(mu), _thin(s2), s=3, alpha=0.3, color=COLORS[c % len(COLORS)], rasterized=True,
                   label=f"{post.label}: {outside:.1%} of draws infeasible")
    stats = release.get("statistics", {})
    try:
        ax.plot(float(stats["mean"]["value"]), float(stats["variance"]["value"]), "o", ms=9, mfc="none",
                mec="red", mew=2, label="released (mean, variance)")
    except (KeyError, TypeError, ValueError):
        pass
    ax.set_xlabel("mu")
    ax.set_ylabel("sigma2")
    top = max((b - a) ** 2 / 4 * 1.6, float(np.quantile(main.components["sigma2"], 0.99)))
    ax.set_ylim(0, top)
    ax.set_xlim(a - 0.3 * (b - a), b + 0.3 * (b - a))
    legend = ax.legend(loc="upper left", fontsize=8)
    for handle in legend.legend_handles:
        if hasattr(handle, "set_sizes"):  # scatter markers readable in the legend
            handle.set_sizes([25])
            handle.set_alpha(0.8)
    fig.tight_layout()
    caption = (f"Feasible region for data bounded in [{a:g}, {b:g}]: sigma^2 <= (mu - a)(b - mu) "
               f"(Kazan & Reiter, Theorem 2; so sigma^2 <= {(b - a) ** 2 / 4:g}). "
               + "; ".join(f"{label}: {share:.1%} of draws outside" for label, share in rows) + ".")
    return Figure("feasible", "Feasible region", _png(fig), caption)


def _predictive_figure(idata, release: dict | None) -> Figure | None:
    import matplotlib.pyplot as plt

    pp = _group(idata, "posterior_predictive")
    names = [str(v) for v in pp.data_vars if pp[v].ndim == 2]
    if not names:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for c, name in enumerate(names[:3]):
        plot_kde(pp[name].values.reshape(-1), ax, label=name, color=COLORS[c])
    if release is not None and "bounds" in release:
        a, b = (float(v) for v in release["bounds"])
        ax.axvspan(a, b, color="0.9", zorder=0, label="data bounds")
    ax.set_yticks([])
    ax.legend(fontsize=8)
    fig.tight_layout()
    return Figure("predictive", "Posterior predictive", _png(fig), "Posterior predictive density of a new record.")


def _arviz_figure(name: str, title: str, plot, caption: str) -> Figure:
    fig = plot()
    fig.tight_layout()
    return Figure(name, title, _png(fig), caption)


def _table_marginal_figures(main: Loaded, others: list[Loaded], release: dict) -> list[Figure]:
    """A posterior of noisy marginals: every measured cell's released proportion against the posterior's median
    and central 90% interval, and the intervals of one marginal no measurement covers (docs/marginals.md)."""
    import matplotlib.pyplot as plt

    from .posterior import Posterior

    posts = [(main.label, Posterior.from_arviz(main.idata))]
    posts += [(o.label, Posterior.from_arviz(o.idata)) for o in others if "junction_tree" in o.attrs]
    n = release.get("n")
    out = []
    measurements = release.get("measurements", [])
    if n and measurements:
        fig, ax = plt.subplots(figsize=(6.5, 6))
        top = 0.0
        for c, (label, post) in enumerate(posts):
            xs, med, lo, hi = [], [], [], []
            for m in measurements:
                draws = post.marginal(m["clique"]).values
                flat = draws.reshape(-1, *draws.shape[2:])
                xs.append(np.asarray(m["value"], float).ravel() / float(n))
                med.append(np.median(flat, axis=0).ravel())
                lo.append(np.quantile(flat, 0.05, axis=0).ravel())
                hi.append(np.quantile(flat, 0.95, axis=0).ravel())
            x, y, l, h = (np.concatenate(v) for v in (xs, med, lo, hi))
            ax.errorbar(x, y, yerr=[y - l, h - y], fmt="o", ms=3, alpha=0.6, color=COLORS[c % len(COLORS)],
                        label=label)
            top = max(top, float(np.max(h)), float(np.max(x)))
        ax.plot([0, top], [0, top], color="0.5", lw=1, ls="--", label="released = posterior")
        ax.set_xlabel("released (noisy) count / n")
        ax.set_ylabel("posterior median and central 90% interval of the cell's probability")
        ax.legend(fontsize=8)
        fig.tight_layout()
        out.append(Figure("measured", "Measured marginals: released against posterior", _png(fig),
                          "One point per cell of every measurement. The posterior pulls cells whose noisy counts "
                          "are impossible (negative, or inconsistent with other measurements) to values the "
                          "records allow; the intervals carry the noise."))
    measured = [set(m["clique"]) for m in measurements]
    attrs = list(release.get("domain", {}))
    pair = next(((a, b) for i, a in enumerate(attrs) for b in attrs[i + 1:]
                 if not any({a, b} <= m for m in measured)), None)
    if pair is not None:
        fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(posts) * 8), 4.5))
        width = 0.8 / len(posts)
        for c, (label, post) in enumerate(posts):
            draws = post.marginal(list(pair))
            flat = draws.values.reshape(-1, *draws.shape[2:])
            med = np.median(flat, axis=0).ravel()
            lo, hi = np.quantile(flat, 0.05, axis=0).ravel(), np.quantile(flat, 0.95, axis=0).ravel()
            xs = np.arange(med.size) + (c - (len(posts) - 1) / 2) * width
            ax.errorbar(xs, med, yerr=[med - lo, hi - med], fmt="o", ms=4, color=COLORS[c % len(COLORS)], label=label)
            names = [f"{u},{v}" for u in draws.coords[pair[0]].values for v in draws.coords[pair[1]].values]
        ax.set_xticks(np.arange(len(names)))
        ax.set_xticklabels(names, rotation=90, fontsize=7)
        ax.set_xlabel(f"cell ({pair[0]}, {pair[1]})")
        ax.set_ylabel("probability: median and central 90% interval")
        ax.legend(fontsize=8)
        fig.tight_layout()
        out.append(Figure("unmeasured", f"An unmeasured marginal: ({pair[0]}, {pair[1]})", _png(fig),
                          f"No measurement covers {pair[0]} and {pair[1]} together: the posterior's intervals come "
                          "from the model linking them through the measured cliques (OpenDP's std() raises for "
                          "such a marginal)."))
    return out


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


# ------------------------------------------------------------------------------ calibration report

def load_calibration(path: Path) -> dict:
    from .release import parse_json

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError("posterior", f"cannot read {path} as a calibration result ({exc})") from None
    result = parse_json(raw, "posterior", limit=64)
    from .posterior import is_release_format, release_given_as

    if isinstance(result, dict) and is_release_format(result.get("format")):
        raise InputError("posterior", release_given_as(path, result["format"], "a posterior or a calibration result"))
    if not isinstance(result, dict) or not isinstance(result.get("methods"), dict) or not result["methods"]:
        raise InputError("posterior", f"{path} is not a calibration result (no 'methods' object)")
    if "sha256" in result:  # written by current versions of calibrate: refuse a result edited afterwards
        from .checkpoint import content_hash

        if result["sha256"] != content_hash(result):
            raise InputError("posterior", f"{path} does not match its sha256 (edited or corrupted after "
                                          "calibrate wrote it)")
    return result


def calibration_ranks(entry: dict) -> dict[str, np.ndarray]:
    """Per-coordinate posterior quantiles of the truth stored in one method's entry.

    Accepts ``ranks``/``quantiles`` as a list (one coordinate), a list of lists
    (trial x coordinate) or a dict ``coordinate -> list``.
    """
    for key in ("ranks", "quantiles", "u"):
        if key in entry:
            raw = entry[key]
            break
    else:
        return {}
    if isinstance(raw, dict):
        return {str(k): np.asarray(v, dtype=float).reshape(-1) for k, v in raw.items()}
    arr = np.asarray(raw, dtype=float)
    if arr.ndim == 1:
        return {"theta": arr}
    if arr.ndim == 2:
        return {f"theta[{j}]": arr[:, j] for j in range(arr.shape[1])}
    return {"theta": arr.reshape(-1)}


def ranks_from_checkpoint(path: Path, result: dict) -> tuple[dict[str, dict[str, np.ndarray]], str | None]:
    """Per-trial quantiles from the checkpoint ``dpposterior calibrate`` writes beside its JSON
    (``<out>.ckpt.json``: one entry per unit with ``ranks[method]`` of shape (trials, coordinates)),
    and a note on why none were used (None when used, or when there is no checkpoint).

    The checkpoint must be this result's run (the same ``run_id``; another run's is refused: its
    ranks would be drawn under this run's table) and every unit must match its content hash.
    """
    from .checkpoint import read_checkpoint

    ck = path.with_name(path.name + ".ckpt.json")
    if not ck.is_file():
        return {}, None
    rid = result.get("run_id")
    if not isinstance(rid, str):
        return {}, (f"Its checkpoint {ck.name} was not used: this result carries no run id (written by an "
                    "older dpposterior), so nothing shows that the two belong to one run.")
    from .diagnostics.calibration import study_id

    try:
        state = json.loads(ck.read_text())
        total, theirs = state["total"], study_id(state["fingerprint"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise InputError("posterior", f"{ck} (the checkpoint beside {path.name}) is unreadable") from None
    if theirs != rid:
        raise InputError("posterior", f"{path.name} and its checkpoint {ck.name} belong to different runs (run ids "
                         f"{rid[:12]} and {theirs[:12]}): rerun calibrate, or remove the checkpoint")
    units = read_checkpoint(ck, total=total, fingerprint=state["fingerprint"], field="posterior")
    if len(units) != total:
        return {}, f"Its checkpoint {ck.name} is unfinished ({len(units)} of {total} units), so it was not used."
    coords = [str(c) for c in result.get("coordinates") or []]
    out: dict[str, dict[str, np.ndarray]] = {}
    try:
        for method in result["methods"]:
            rows = [r for i in range(total) for r in units[i]["ranks"][method] if r is not None]
            u = np.asarray(rows, dtype=float).reshape(len(rows), -1)
            names = coords if len(coords) == u.shape[1] else [f"theta[{j}]" for j in range(u.shape[1])]
            out[method] = {name: u[:, j] for j, name in enumerate(names)}
    except (KeyError, TypeError, ValueError):
        raise InputError("posterior", f"{ck} does not hold ranks for this result's methods") from None
    used = {m: len(next(iter(v.values()))) for m, v in out.items()}
    expected = {m: e.get("trials_used") for m, e in result["methods"].items() if isinstance(e, dict)}
    if any(expected.get(m) not in (None, n) for m, n in used.items()):
        raise InputError("posterior", f"{ck} holds {used} ranks per method, {path.name} says {expected}")
    return out, None


def rank_ecdf_band(ntrials: int, prob: float = 0.95, points: int = 199, sims: int = 2000):
    """Evaluation points in (0, 1) and the simultaneous ``prob`` band of the uniform ECDF for ``ntrials``.

    Saeilynoja, Buerkner & Vehtari (2022), "simulated" variant (as ArviZ's
    ``ecdf_confidence_band(method="simulated")``, without its numba start-up cost): the band
    is the pointwise binomial interval at the level gamma for which ``prob`` of simulated
    uniform ECDFs stay inside at every point at once.  gamma is the (1 - prob) quantile, over
    ``sims`` simulated ECDFs (fixed seed), of each ECDF's smallest pointwise two-sided
    binomial tail probability.
    """
    from scipy import stats

    x = np.linspace(0, 1, points + 2)[1:-1]
    rng = np.random.default_rng(20220101)
    # the ECDF of ntrials uniforms at x: cumulative multinomial counts of the bins between the points
    bins = np.diff(np.concatenate([[0.0], x, [1.0]]))
    counts = np.cumsum(rng.multinomial(ntrials, bins, size=sims), axis=1)[:, :-1]  # (sims, points)
    lower_tail = stats.binom.cdf(counts, ntrials, x)
    upper_tail = stats.binom.sf(counts - 1, ntrials, x)
    extremeness = np.minimum(1.0, 2.0 * np.minimum(lower_tail, upper_tail)).min(axis=1)
    gamma = float(np.quantile(extremeness, 1.0 - prob))
    lower = stats.binom.ppf(gamma / 2, ntrials, x) / ntrials
    upper = stats.binom.ppf(1 - gamma / 2, ntrials, x) / ntrials
    return x, lower, upper


def _calibration_sections(path: Path):
    import matplotlib.pyplot as plt

    result = load_calibration(path)
    methods = result["methods"]
    sections: list[Any] = []
    meta = [(k, str(result[k])) for k in ("family", "n", "epsilon", "mechanism", "trials", "seed", "prior")
            if result.get(k) is not None]  # epsilon is null under a discrete-gaussian mechanism (its rho)
    sections.append(("table", "Run", ["", ""], meta))
    header = ["method", "KS", "KS p-value", "coverage 50%", "coverage 90%", "coverage 95%", "MMD"]
    rows = []
    for name, m in methods.items():
        cov = m.get("coverage", {}) if isinstance(m, dict) else {}
        rows.append([name, *(_maybe(m.get(k)) for k in ("ks", "ks_pvalue")),
                     *(_maybe(cov.get(q)) for q in ("0.5", "0.9", "0.95")), _maybe(m.get("mmd"))])
    sections.append(("table", "Calibration summary", header, rows))
    ranks = {name: calibration_ranks(m) for name, m in methods.items() if isinstance(m, dict)}
    ranks = {k: v for k, v in ranks.items() if v}
    why_not = None
    if not ranks:
        ranks, why_not = ranks_from_checkpoint(path, result)
        if ranks:
            sections.append(("note", f"Per-trial quantiles read from the run's checkpoint "
                                     f"{path.name}.ckpt.json (same run id, every unit's hash verified)."))
    if not ranks:
        sections.append(("note", why_not or "This result holds no per-trial quantiles (and its checkpoint "
                                 f"{path.name}.ckpt.json is missing), so no rank ECDF can be drawn."))
        return f"dpposterior calibration report: {result.get('family', '?')}", sections
    coords = sorted({c for r in ranks.values() for c in r})[:6]
    fig, axes = plt.subplots(1, len(coords), figsize=(5.5 * len(coords), 4.2), squeeze=False)
    band_n = None
    for ax, coord in zip(axes.flat, coords):
        for c, (name, per_coord) in enumerate(ranks.items()):
            if coord not in per_coord:
                continue
            u = np.sort(per_coord[coord][np.isfinite(per_coord[coord])])
            n = len(u)
            if band_n != n:
                x, lower, upper = rank_ecdf_band(n)
                band_n = n
            ecdf = np.searchsorted(u, x, side="right") / n
            if c == 0:
                ax.fill_between(x, lower - x, upper - x, color="0.85",
                                label=f"95% simultaneous band (N = {n})")
            ax.step(x, ecdf - x, where="post", color=COLORS[c % len(COLORS)], lw=1.6, label=name)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xlabel("posterior quantile of the true parameter")
        ax.set_ylabel("ECDF - uniform CDF")
        ax.set_title(coord)
        ax.legend(fontsize=8)
    fig.tight_layout()
    sections.append(Figure("rank_ecdf", "Rank ECDF", _png(fig),
                           "ECDF of the posterior quantile of the true parameter over the simulated trials, minus "
                           "the uniform CDF. A calibrated method stays inside the grey 95% simultaneous band "
                           "(Saeilynoja et al. 2022) along the whole curve; an S shape means over-confident "
                           "(too narrow) posteriors, a bump the other way over-dispersed ones."))
    return f"dpposterior calibration report: {result.get('family', '?')}", sections


def _maybe(x) -> str:
    if x is None:
        return ""
    try:
        return _fmt(x)
    except (TypeError, ValueError):
        return html.escape(str(x))


# ------------------------------------------------------------------------------ HTML

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;
color:#222;padding:0 1em}
h1{font-size:1.5em;border-bottom:2px solid #1f77b4;padding-bottom:.3em}
h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right;white-space:nowrap}
th{background:#f0f4f8}
td:first-child,th:first-child{text-align:left}
img{max-width:100%;border:1px solid #eee}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.4em .8em}
.caption{color:#555;font-size:.9em}
footer{margin-top:2em;color:#888;font-size:.8em}
"""


def _html(title: str, sections) -> str:
    from ._version import __version__

    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    for s in sections:
        if isinstance(s, Figure):
            data = base64.b64encode(s.png).decode("ascii")
            parts.append(f'<h2>{html.escape(s.title)}</h2><figure><img alt="{html.escape(s.title)}" '
                         f'src="data:image/png;base64,{data}"><figcaption class="caption">'
                         f"{html.escape(s.caption)}</figcaption></figure>")
        elif s[0] == "note":
            parts.append(f'<p class="note">{html.escape(s[1])}</p>')
        elif s[0] == "table":
            _, caption, header, rows = s
            parts.append(f"<h2>{html.escape(caption)}</h2><table>")
            if any(header):
                parts.append("<tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>")
            for row in rows:
                parts.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>")
            parts.append("</table>")
    parts.append(f"<footer>written by dpposterior {html.escape(__version__)} &middot; figures also saved as PNG "
                 "files beside this page</footer></body></html>")
    return "\n".join(parts) + "\n"


if __name__ == "__main__":  # pragma: no cover - convenience: python -m dpposterior.report FILE OUT
    write_report(sys.argv[1], sys.argv[2], compare=sys.argv[3:])
