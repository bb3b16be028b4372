"""Posterior results: arrays with a leading (chain, draw) axis, exported to ArviZ.

Every engine returns a :class:`Posterior`.  ``to_arviz()`` gives what the installed
ArviZ works with (an ``arviz.InferenceData`` on ArviZ 0.x, an ``xarray.DataTree`` on
ArviZ 1.x; ``to_datatree()`` gives the DataTree on either) with groups ``posterior``
(and, where the engine makes them, ``posterior_predictive`` and ``sample_stats``) and
attrs naming the family, the method, the release's sha256, the package version and the seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Posterior:
    family: str
    method: str
    #: variable -> array of shape (chain, draw, *event)
    posterior: dict[str, np.ndarray]
    #: variable -> names of its event dims (not chain/draw)
    dims: dict[str, list[str]] = field(default_factory=dict)
    coords: dict[str, list] = field(default_factory=dict)
    posterior_predictive: dict[str, np.ndarray] = field(default_factory=dict)
    sample_stats: dict[str, np.ndarray] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    #: engine-specific extras kept in Python only (e.g. a trained flow)
    extras: dict[str, Any] = field(default_factory=dict)
    #: reasons not to trust this posterior as it is (dpposterior.checks): printed by the CLI, and
    #: written to the netCDF attribute ``warnings`` ("none" when empty)
    warnings: list[str] = field(default_factory=list)
    #: whether the draws are independent (exact, variational or flow samplers; not MCMC): set by the
    #: engine, written to the netCDF attribute ``iid_draws`` (1/0); R-hat, ESS and trace plots skip them
    iid: bool = False
    #: variables stored as float32 in files and ``to_arviz()`` (large per-area variables whose Monte Carlo
    #: error is far above float32's 6e-8 relative rounding); the draws in memory stay float64.  Named in the
    #: netCDF attribute ``float32_variables`` ("none" when empty)
    float32_variables: tuple = ()

    def __post_init__(self):
        for name, arr in self.posterior.items():
            arr = np.asarray(arr)
            if arr.ndim < 2:
                raise ValueError(f"posterior[{name!r}] must have (chain, draw) leading axes")
            self.posterior[name] = arr

    @property
    def nchains(self) -> int:
        return next(iter(self.posterior.values())).shape[0]

    @property
    def ndraws(self) -> int:
        return next(iter(self.posterior.values())).shape[1]

    def draws(self, name: str) -> np.ndarray:
        """Draws of ``name`` flattened over chains: shape (chain*draw, *event)."""
        arr = self.posterior[name]
        return arr.reshape(-1, *arr.shape[2:])

    def dataset(self):
        """The posterior variables with their labels: an ``xarray.Dataset`` with dims (chain, draw, *dims)
        and the coordinate labels of :attr:`coords` (``ds["rate"].sel(area="A")``).  A view built on each
        call over the same arrays (no copy); :attr:`posterior` stays the dict of numpy arrays that engines
        and checks index.  xarray is imported here only (``import dpposterior`` stays light)."""
        import xarray as xr

        variables, coords = {}, {"chain": np.arange(self.nchains), "draw": np.arange(self.ndraws)}
        for name, arr in self.posterior.items():
            event = arr.shape[2:]
            dims = list(self.dims.get(name, []))
            if len(dims) != len(event):
                dims = [f"{name}_dim_{i}" for i in range(len(event))]
            for dim, size in zip(dims, event):
                labels = self.coords.get(dim)
                if labels is not None and len(labels) == size:
                    coords.setdefault(dim, list(labels))
                else:
                    coords.setdefault(dim, np.arange(size))
            variables[name] = (("chain", "draw", *dims), arr)
        return xr.Dataset(variables, coords=coords, attrs={"family": self.family, "method": self.method, **self.attrs})

    def stored(self) -> dict[str, np.ndarray]:
        """The posterior variables as files hold them: those in ``float32_variables`` rounded to float32."""
        return {name: arr.astype(np.float32) if name in self.float32_variables and arr.dtype == np.float64 else arr
                for name, arr in self.posterior.items()}

    def netcdf_attrs(self, stored: dict | None = None) -> dict:
        """The attributes of the file and of each of its groups (netCDF types: str, numbers, 1-d arrays);
        ``stored``: the variables as written (:meth:`stored`), which ``draws_sha256`` seals."""
        from ._version import __version__

        attrs = {"family": self.family, "method": self.method, "dpposterior_version": __version__}
        for key, value in self.attrs.items():
            attrs[key] = _attr_value(value)
        attrs["warnings"] = " | ".join(self.warnings) if self.warnings else "none"
        attrs["iid_draws"] = int(bool(self.iid))
        floats32 = [name for name in self.posterior if name in self.float32_variables]
        attrs["float32_variables"] = ", ".join(floats32) if floats32 else "none"
        # report refuses a file whose draws differ
        attrs["draws_sha256"] = draws_sha256(stored if stored is not None else self.stored())
        return attrs

    def to_arviz(self):
        """The posterior as the installed ArviZ holds one: an ``arviz.InferenceData`` on ArviZ 0.x (Python
        3.11), the ``xarray.DataTree`` of :meth:`to_datatree` on ArviZ 1.x (Python >= 3.12).  Either way the same
        groups, variables, dims, coords and attributes (each group's and the root's: :meth:`netcdf_attrs`)."""
        from .arviz_compat import arviz_major, from_dict

        if arviz_major() >= 1:
            return self.to_datatree()
        stored = self.stored()
        attrs = self.netcdf_attrs(stored)
        groups = self._groups(stored)
        dims = {k: v for k, v in self.dims.items()}
        idata = from_dict(groups, dims=dims, coords=self.coords or None, attrs=attrs)
        for group, data in groups.items():  # the model's order of variables (ArviZ 0.23.4 sorts them by name)
            ds = getattr(idata, group)
            order = [k for k in data if k in ds.data_vars]
            if order != list(ds.data_vars):
                setattr(idata, group, ds[order + [k for k in ds.data_vars if k not in order]])
        from .netcdf import group_attrs

        for group in idata.groups():
            getattr(idata, group).attrs.update(group_attrs(attrs))
        return idata

    def _groups(self, stored: dict) -> dict:
        groups = {"posterior": stored}
        if self.posterior_predictive:
            groups["posterior_predictive"] = self.posterior_predictive
        if self.sample_stats:
            groups["sample_stats"] = self.sample_stats
        return groups

    def to_datatree(self):
        """The posterior as an ``xarray.DataTree`` (ArviZ 1's container), on any ArviZ: child nodes
        ``posterior`` (and ``posterior_predictive``, ``sample_stats`` where the engine made them) with dims
        (chain, draw, *event), the coords of :attr:`coords` (else 0..n-1, event dims unnamed in :attr:`dims`
        called ``{name}_dim_{i}``), and :meth:`netcdf_attrs` on the root and on every group (less the release's
        text, ``release_json``, on the root only: ``netcdf.FILE_ONLY_ATTRS``), each group also with ``created_at``
        and ``arviz_version`` -- what :meth:`to_arviz` holds on ArviZ 0.x and what a file of
        :meth:`to_netcdf` reads back as.  ``to_datatree().to_netcdf(path, engine="h5netcdf")`` writes a file
        that :meth:`read` and both ArviZ versions read.  Needs only xarray (>= 2024.10)."""
        import datetime

        import xarray as xr

        from .netcdf import _arviz_version, _event_dims, group_attrs

        if not hasattr(xr, "DataTree"):  # (pyproject allows older xarray, which ArviZ 0.23 accepts)
            raise RuntimeError(f"to_datatree() needs xarray >= 2024.10 (xarray.DataTree); this is {xr.__version__}")
        stored = self.stored()
        attrs = self.netcdf_attrs(stored)
        created = datetime.datetime.now(datetime.timezone.utc).isoformat()
        nodes = {"/": xr.Dataset(attrs=attrs)}
        for name, variables in self._groups(stored).items():
            first = np.asarray(next(iter(variables.values())))
            coords = {"chain": np.arange(first.shape[0]), "draw": np.arange(first.shape[1])}
            data_vars = {}
            for var, arr in variables.items():
                arr = np.asarray(arr)
                event = _event_dims(var, arr, self.dims, self.coords)
                for dim, values in event:
                    coords.setdefault(dim, values)
                data_vars[var] = (("chain", "draw", *(dim for dim, _ in event)), arr)
            nodes[name] = xr.Dataset(data_vars, coords=coords,
                                     attrs={"created_at": created, "arviz_version": _arviz_version(),
                                            **group_attrs(attrs)})
        return xr.DataTree.from_dict(nodes)

    def to_netcdf(self, path, field: str = "out") -> None:
        """Write the posterior to ``path`` (ArviZ netCDF) atomically.

        The file is built in memory first and then written as bytes (``files.write_bytes``: unique
        temporary name, fsync, rename).  HDF5 writing straight to a full disk ended in a
        segmentation fault when h5py freed its half-written objects (3 of 3 runs); from
        memory a full disk is one ``OSError`` on a plain write: one line, nothing left behind.
        ArviZ's InferenceData layout is written with h5netcdf alone: no ArviZ/xarray import (imports stay light).
        """
        import io

        from .files import write_bytes
        from .netcdf import write_posterior

        seed = self.attrs.get("seed")
        hint = "the same command" + (f" (seed {seed})" if seed is not None else " with a --seed") + \
            " gives the same draws again"
        stored = self.stored()
        attrs = self.netcdf_attrs(stored)
        buf = io.BytesIO()
        write_posterior(self, buf, attrs, stored)
        with buf.getbuffer() as data:  # the buffer itself, not a copy (0.6 GB at 10^7 cells)
            write_bytes(path, data, field=field, hint=hint)

    def summary(self, hdi_prob: float = 0.95, var_names=None):
        """Summary table (a pandas DataFrame, printed whole): per scalar component the mean, sd, the
        ``hdi_prob`` highest-density interval (HDI, the shortest interval, never the equal-tailed one) and,
        with more than one chain and more than 3 draws, mcse_mean, mcse_sd, ess_bulk, ess_tail and r_hat --
        ArviZ 0.23's ``az.summary(hdi_prob=hdi_prob)``, its columns, labels and rounding, computed by
        :mod:`dpposterior.convergence` so that the numbers are the same under ArviZ 0.x and 1.x (ArviZ 1's own
        summary defaults to an 89% equal-tailed interval).  ``var_names``: the variables to include (all)."""
        import pandas as pd

        from .convergence import DECIMALS, summary_rows
        from .errors import InputError

        stored = self.stored()  # (the values of the file and of to_arviz(): float32 where it says so)
        names = list(stored)
        if var_names is not None:
            names = [var_names] if isinstance(var_names, str) else list(var_names)
            missing = [n for n in names if n not in stored]
            if missing:
                raise InputError("var_names", f"no posterior variable {', '.join(map(repr, missing))}")
        post = Posterior(family=self.family, method=self.method, dims=self.dims, coords=self.coords,
                         posterior={n: stored[n] for n in names})
        columns, rows = summary_rows(post, hdi_prob=hdi_prob, mcse=True)
        table = pd.DataFrame([values for _, values in rows], index=[label for label, _ in rows], columns=columns,
                             dtype=float)
        # padding cells of a ragged variable (naive-bayes levels) are no parameters: their rows are left out
        table = table[~table.isna().all(axis=1) & table["mean"].notna()]
        table = table.round({c: DECIMALS.get(c, 3) for c in columns})
        return _summary_frame_class()(table)

    def mean(self, name: str) -> np.ndarray:
        return self.draws(name).mean(axis=0)

    # ------------------------------------------------------------------ tables of categorical attributes
    def junction_tree(self):
        """The :class:`~dpposterior.cliques.JunctionTree` of a posterior over a table's clique tables (the
        ``marginals`` family), from its ``junction_tree`` attribute; a one-line error for any other posterior."""
        import json

        from .cliques import JunctionTree
        from .errors import InputError

        record = self.attrs.get("junction_tree")
        if record is None:
            raise InputError("posterior", f"holds no table model (family {self.family!r}); marginal() and "
                             "synthesize() take a posterior of noisy marginals")
        return JunctionTree.from_record(json.loads(record) if isinstance(record, str) else record)

    def clique_tables(self) -> list[np.ndarray]:
        """The draws of each junction-tree clique's joint table, (chain, draw, *clique shape), in tree order."""
        tree = self.junction_tree()
        return [np.asarray(self.posterior["p[" + ",".join(c) + "]"], float) for c in tree.cliques]

    def marginal(self, attributes, counts: bool = False):
        """Draws of the marginal table of ``attributes`` (a list, or a string "a,b"), measured or not, as an
        ``xarray.DataArray`` with dims (chain, draw, *attributes) labelled by the attributes' levels.

        Probabilities by default; ``counts=True`` gives n times them, the expected counts of a table of the
        release's n records (``n`` public), or of each draw's n where the posterior has a variable ``n`` (a release
        without n); refused otherwise."""
        import xarray as xr

        from .errors import InputError

        if isinstance(attributes, str):
            attributes = [a.strip() for a in attributes.split(",") if a.strip()]
        attributes = list(attributes)
        if not attributes:
            raise InputError("attributes", "name at least one attribute")
        tree = self.junction_tree()
        values = tree.marginal(self.clique_tables(), attributes)
        if counts:
            n = self.attrs.get("n")
            if "n" in self.posterior:  # the total unknown: each draw's own n
                draws_n = np.asarray(self.posterior["n"], float)
                values = values * draws_n.reshape(draws_n.shape + (1,) * (values.ndim - 2))
            elif n is None:
                raise InputError("counts", "the release did not publish n: only probabilities can be given")
            else:
                values = values * float(n)
        coords = {"chain": np.arange(self.nchains), "draw": np.arange(self.ndraws)}
        for a in attributes:
            labels = self.coords.get(a)
            coords[a] = list(labels) if labels is not None and len(labels) == tree.sizes[a] else np.arange(tree.sizes[a])
        return xr.DataArray(values, dims=("chain", "draw", *attributes), coords=coords,
                            name=("count" if counts else "p") + "[" + ",".join(attributes) + "]")

    # ------------------------------------------------------------------ geographic tables (census family)
    def census_schema(self) -> tuple[dict, dict]:
        """(attributes, queries) of a posterior of block histograms (the ``census`` family); a one-line error for
        any other posterior."""
        import json

        from .errors import InputError

        if "counts" not in self.posterior or "census_attributes" not in self.attrs:
            raise InputError("posterior", f"holds no block histograms (family {self.family!r}); counts() and "
                             "tabulate take a posterior of the census family")
        return json.loads(self.attrs["census_attributes"]), json.loads(self.attrs["census_queries"])

    def counts(self, geocodes=None, query: str = "total", level: str | None = None):
        """Draws of persons by the cells of ``query``, as an ``xarray.DataArray``:

        - ``geocodes`` (a GEOID prefix or a list of them: blocks, block groups, tracts, ... in any mix): their union
          of blocks, summed -- dims (chain, draw, query cell);
        - ``level`` (``state``, ``county``, ``tract``, ``block_group``, ``block``): every geounit of that level --
          dims (chain, draw, ``level``, query cell);
        - neither: every block together."""
        import xarray as xr

        from .errors import InputError
        from .geotables import LEVEL_DIGITS, cell_labels, group_sum, prefix_members, query_cell_map, to_query

        attributes, queries = self.census_schema()
        if query not in queries:
            raise InputError("query", f"unknown query {query!r} (one of: {', '.join(queries)})")
        qc, sizes = query_cell_map(attributes, queries)
        qi = list(queries).index(query)
        blocks = np.asarray(self.coords["block"]).astype(str)
        x = self.posterior["counts"]
        coords = {"chain": np.arange(self.nchains), "draw": np.arange(self.ndraws),
                  "cell": cell_labels(attributes, queries[query])}
        if level is not None:
            if level not in LEVEL_DIGITS:
                raise InputError("level", f"unknown level {level!r} (one of: {', '.join(LEVEL_DIGITS)})")
            units, group = np.unique(np.array([b[:LEVEL_DIGITS[level]] for b in blocks]), return_inverse=True)
            out = np.empty((self.nchains, self.ndraws, len(units), int(sizes[qi])), dtype=np.int64)
            for ch in range(self.nchains):  # a chain at a time: the block draws are the large array
                out[ch] = group_sum(to_query(x[ch], qc[qi], int(sizes[qi])), group, len(units), axis=1)
            coords[level] = list(units)
            return xr.DataArray(out, dims=("chain", "draw", level, "cell"), coords=coords, name=f"persons[{query}]")
        mask = np.ones(len(blocks), dtype=bool) if geocodes is None else prefix_members(blocks, geocodes)
        out = np.stack([to_query(x[ch][:, mask].sum(axis=1), qc[qi], int(sizes[qi])) for ch in range(self.nchains)])
        return xr.DataArray(out, dims=("chain", "draw", "cell"), coords=coords, name=f"persons[{query}]")

    @classmethod
    def from_arviz(cls, idata) -> "Posterior":
        """A Posterior from an ``arviz.InferenceData`` or an ``xarray.DataTree`` (a posterior file read back by
        ArviZ 0.x or 1.x, or :meth:`to_arviz`/:meth:`to_datatree`)."""
        from .arviz_compat import group, root_attrs
        from .netcdf import FILE_ONLY_ATTRS

        ds = group(idata, "posterior")
        if ds is None:
            raise ValueError("no posterior group")
        posterior, dims, coords = {}, {}, {}
        for name, var in ds.data_vars.items():
            posterior[name] = np.asarray(var.values)
            event = [d for d in var.dims if d not in ("chain", "draw")]
            if event:
                dims[name] = event
            for d in event:
                coords.setdefault(d, [v.item() if hasattr(v, "item") else v for v in ds[d].values])
        attrs = dict(ds.attrs)
        root = root_attrs(idata)
        attrs.update({key: root[key] for key in FILE_ONLY_ATTRS if key in root})  # (the file's own, e.g. the release)
        family, method = str(attrs.pop("family", "")), str(attrs.pop("method", ""))
        extra = {}
        for name in ("posterior_predictive", "sample_stats"):
            other = group(idata, name)
            if other is not None:
                extra[name] = {k: np.asarray(v.values) for k, v in other.data_vars.items()}
        out = cls(family=family, method=method, posterior=posterior, dims=dims, coords=coords, attrs=attrs,
                  iid=bool(int(attrs.get("iid_draws", 0) or 0)), **extra)
        if isinstance(out.attrs.get("n"), (np.integer, np.floating)):
            out.attrs["n"] = int(out.attrs["n"])
        return out

    @classmethod
    def read(cls, path, field: str = "posterior") -> "Posterior":
        """A posterior file (netCDF, as ``infer --out`` writes it) read back; a one-line error naming ``field``."""
        from .arviz_compat import close, group, read_netcdf
        from .errors import InputError, check_input_file

        check_input_file(path, field)
        try:
            idata = read_netcdf(path)
        except (OSError, ValueError, KeyError) as exc:
            raise InputError(field, _not_a_posterior(path, exc)) from None
        try:
            if group(idata, "posterior") is None:
                raise InputError(field, "holds no posterior group")
            return cls.from_arviz(idata)  # numpy copies: the file is no longer needed
        finally:
            close(idata)


def is_release_format(fmt) -> bool:
    """Whether a JSON's ``format`` names a release manifest, any version of ``release.FORMAT`` (spelled here, as this
    module sits below the release layer and may not import it)."""
    return isinstance(fmt, str) and fmt.startswith("dpposterior-release/")


def release_given_as(path, fmt: str, expected: str) -> str:
    """The one-line reason for a release file passed where ``expected`` belongs, with the command that makes its
    posterior (``Posterior.read`` and ``report`` say it alike)."""
    return (f"{path} is a release ({fmt}), not {expected}; a release is analysed first: "
            f"dpposterior infer {path} --out POST.nc")


def _not_a_posterior(path, exc) -> str:
    """Why ``path`` is not a posterior file; a release manifest is named as such, since passing the release where
    its posterior belongs is the likely slip."""
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"{"):
        import re

        fmt = re.search(rb'"format"\s*:\s*"([^"]{1,60})"', head)
        fmt = fmt.group(1).decode(errors="replace") if fmt else ""
        if is_release_format(fmt):
            return release_given_as(path, fmt, "a posterior (netCDF)")
        return f"{path} is a JSON file{f' ({fmt})' if fmt else ''}, not a posterior (netCDF)"
    return f"cannot read a posterior file ({type(exc).__name__}: {exc})"


def draws_sha256(posterior: dict) -> str:
    """SHA-256 of the posterior draws (each variable's name, dtype, shape and bytes, by name): the
    seal ``to_netcdf`` writes as the attribute ``draws_sha256`` and ``report`` checks."""
    import hashlib

    digest = hashlib.sha256()
    for name in sorted(posterior):
        arr = np.ascontiguousarray(posterior[name])
        digest.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        digest.update(memoryview(arr).cast("B"))  # (the bytes in place: no copy of a GB-sized array)
    return digest.hexdigest()


_SUMMARY_FRAME = None


def _summary_frame_class():
    """``SummaryFrame``, built on first use: pandas is imported only where a summary is made (about 0.3 s;
    docs/architecture.md, "Imports stay light")."""
    global _SUMMARY_FRAME
    if _SUMMARY_FRAME is None:
        import pandas as pd

        class SummaryFrame(pd.DataFrame):
            """ArviZ's summary DataFrame, printed whole: ``print(post.summary())`` never cuts rows or columns."""

            @property
            def _constructor(self):
                return SummaryFrame

            def __repr__(self) -> str:
                return self.to_string()

            def __str__(self) -> str:
                return self.to_string()

        SummaryFrame.__module__ = __name__
        _SUMMARY_FRAME = SummaryFrame
    return _SUMMARY_FRAME


def __getattr__(name):  # ``dpposterior.posterior.SummaryFrame`` resolves (PEP 562), as unpickling a summary needs
    if name == "SummaryFrame":
        return _summary_frame_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _attr_value(value):
    """netCDF attrs take str, numbers and 1-d arrays; stringify the rest."""
    if value is None:
        return "none"
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, float, str, np.integer, np.floating)):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        arr = np.asarray(value)
        if arr.ndim == 1 and arr.dtype.kind in "if":
            return arr
    return str(value)
