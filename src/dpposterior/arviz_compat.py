"""Every ArviZ call of the package, for ArviZ 0.x and 1.x alike.

ArviZ 1 replaced ``arviz.InferenceData`` by ``xarray.DataTree``, split itself into arviz_base, arviz_stats and
arviz_plots, renamed arguments (``hdi_prob`` -> ``prob``/``ci_prob``) and changed the interval defaults
(0.89, equal-tailed).  It is served for Python >= 3.12 only, so Python 3.11 keeps ArviZ 0.23 (pyproject.toml).
The rest of the package calls ArviZ only through this module, which takes and returns the type the installed
ArviZ uses (InferenceData on 0.x, DataTree on 1.x) and names every interval's kind and probability itself.

What does not depend on ArviZ at all: the netCDF layout (``dpposterior.netcdf`` writes it, both versions read
it), :meth:`~dpposterior.posterior.Posterior.to_datatree`, and the numbers of summary tables and HDIs
(``dpposterior.convergence``, ArviZ 0.23's arithmetic), so those are the same under both versions.

ArviZ is imported inside the functions: importing it costs seconds (docs/architecture.md, "Imports stay light").
"""

from __future__ import annotations

import functools

import numpy as np

#: the groups a posterior file or object may carry, in ArviZ's order
GROUPS = ("posterior", "posterior_predictive", "sample_stats")
#: the probability of the envelope drawn around a rank plot's uniform ECDF (ArviZ 1)
RANK_ENVELOPE_PROB = 0.99


@functools.lru_cache(maxsize=None)
def arviz_major() -> int:
    """The installed ArviZ's major version (0 or 1), read from its metadata without importing it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version("arviz").split(".", 1)[0])
    except PackageNotFoundError:  # pragma: no cover - arviz is a dependency
        return 0


def is_datatree(data) -> bool:
    """Whether ``data`` is an ``xarray.DataTree`` (ArviZ 1's container) rather than an InferenceData."""
    return type(data).__name__ == "DataTree" and hasattr(data, "children")


# ------------------------------------------------------------------------------ containers

def from_dict(groups: dict, dims: dict, coords: dict | None, attrs: dict):
    """ArviZ 0.x's ``InferenceData`` of ``{group: {variable: (chain, draw, *event) array}}`` (``az.from_dict``).
    ArviZ 1 is not asked: ``Posterior.to_arviz`` gives it ``Posterior.to_datatree()``."""
    import arviz as az

    if arviz_major() >= 1:
        raise RuntimeError("from_dict builds an ArviZ 0.x InferenceData; use Posterior.to_datatree() on ArviZ 1")
    return az.from_dict(**groups, dims=dims, coords=coords, attrs=attrs)


def read_netcdf(path):
    """A posterior file read by the installed ArviZ: an InferenceData (0.x) or a DataTree (1.x)."""
    import arviz as az

    data = az.from_netcdf(str(path), engine="h5netcdf")
    if is_datatree(data):
        # a DataTree's nodes refer to each other (a reference cycle), so its lazily read file would stay open
        # until the garbage collector runs (rewriting the file in between fails): read it whole, then close it
        data.load()
        data.close()
    return data


def close(data) -> None:
    """Close the file a posterior read by :func:`read_netcdf` may still hold: ArviZ 0.x reads each group lazily,
    so the file stays open until the garbage collector frees the data, and opening it for writing in between
    fails ("file is already open for read-only").  Call it when the data are no longer needed."""
    if is_datatree(data):
        data.close()
        return
    for name in group_names(data):
        group(data, name).close()


def group_names(data) -> list[str]:
    """The groups of an InferenceData or a DataTree (its child nodes), in their order."""
    if is_datatree(data):
        return [str(name) for name in data.children]
    return list(data.groups())


def group(data, name: str):
    """Group ``name`` of an InferenceData or a DataTree as an ``xarray.Dataset``; None when absent."""
    if name not in group_names(data):
        return None
    if is_datatree(data):
        return data[name].to_dataset()
    return getattr(data, name)


def root_attrs(data) -> dict:
    """The file-level attributes of an InferenceData or a DataTree (its root node)."""
    attrs = getattr(data, "attrs", None)
    return dict(attrs) if attrs else {}


# ------------------------------------------------------------------------------ statistics

def psislw(log_weights: np.ndarray) -> tuple[np.ndarray, float]:
    """Pareto-smoothed, normalised log weights and k-hat of a 1-d array of log importance weights, with a
    relative efficiency of 1 (independent draws).  ArviZ 1 fits the Pareto tail with its own estimator: its
    k-hat differs from 0.x's in the second or third digit."""
    lw = np.asarray(log_weights, float)
    if arviz_major() >= 1:
        from arviz_stats.base import array_stats

        # arviz_stats' psislw takes log-likelihood values: the log weights are their negatives
        smoothed, khat = array_stats.psislw(-lw, r_eff=1.0)
    else:
        import arviz as az

        smoothed, khat = az.psislw(lw, reff=1.0)
    return np.asarray(smoothed, float), float(np.asarray(khat))


# ------------------------------------------------------------------------------ plots (matplotlib)

def plot_kde(x, ax, label: str | None = None, **style) -> None:
    """A kernel density estimate of the draws ``x`` as a line on ``ax`` (``style``: matplotlib line keywords)."""
    x = np.asarray(x, float).reshape(-1)
    if arviz_major() >= 1:
        from arviz_stats.base import array_stats

        grid, pdf, _ = array_stats.kde(x)
        ax.plot(np.asarray(grid), np.asarray(pdf), label=label, **style)
        return
    import arviz as az

    az.plot_kde(x, ax=ax, plot_kwargs=style, label=label)


def trace_figure(data, var_names: list[str]):
    """The trace plot of ``var_names`` (per-chain densities left, draws in order right): a matplotlib Figure."""
    import arviz as az

    if arviz_major() >= 1:
        pc = az.plot_trace_dist(data, var_names=var_names, compact=True, kind="kde", backend="matplotlib")
        return pc.viz["figure"].item()
    axes = az.plot_trace(data, var_names=var_names, compact=True, kind="trace", show=False)
    return np.asarray(axes).flat[0].get_figure()


def rank_figure(data, var_names: list[str]):
    """The rank plot of ``var_names``: a matplotlib Figure.  ArviZ 0.x draws each chain's rank histogram
    as vertical lines around the uniform count; ArviZ 1 the difference of each chain's rank ECDF from the
    uniform one inside a simultaneous :data:`RANK_ENVELOPE_PROB` envelope."""
    import arviz as az

    if arviz_major() >= 1:
        pc = az.plot_rank(data, var_names=var_names, method="envelope", envelope_prob=RANK_ENVELOPE_PROB,
                          backend="matplotlib")
        return pc.viz["figure"].item()
    axes = az.plot_rank(data, var_names=var_names, kind="vlines", show=False)
    return np.asarray(axes).flat[0].get_figure()


def rank_caption() -> str:
    """What the rank plot of the installed ArviZ shows, for its caption."""
    if arviz_major() >= 1:
        return ("Each chain's rank ECDF minus the uniform one, inside a simultaneous "
                f"{RANK_ENVELOPE_PROB:.0%} envelope: the lines stay inside when the chains mix "
                "(Vehtari et al. 2021; Säilynoja et al. 2022).")
    return ("Ranks of each chain's draws among all draws: uniform (flat around the dashed line) when the "
            "chains mix (Vehtari et al. 2021).")
