"""``dpposterior reproduce``: one headline result of each of the five papers, rerun.

Each entry reruns a result with the engines of this package (through their public
functions: ``dpposterior.infer``, the families' ``simulate``/``make_release``, and
``diagnostics.calibration.calibrate``), and writes into ``OUT/NAME/``:

* ``figure.png`` -- the paper's figure, redrawn from our numbers;
* ``table.md``   -- our numbers beside the paper's (the paper's numbers are kept in
  ``gallery/_common.py``, :data:`PAPER`, copied from the texts in ``shared/papers`` and the UCI
  README; where a paper gives a figure only, its stated claims are quoted);
* ``result.json`` -- every number behind the table.

Default scale finishes in minutes on a 2-core machine; ``--full`` is the paper's
scale.  Loops over cells and repeats go through ``checkpoint.run_units`` with the
``--scheduler`` backend and a checkpoint in ``OUT/NAME/``, so an interrupted
``reproduce`` continues where it stopped when rerun with the same options.

Papers: Kazan & Reiter (003, Example 1 and Fig. 2), Bernstein & Sheldon 2018 (001,
Fig. 1a), Karwa, Kifer & Slavkovic (002, Fig. 1), Alparslan, Yildirim & Birbil
(004, Fig. 2 and Table 1), Xiong, Ju & Zhang (000, Tables 2-4 and Fig. 1); and one real-data
example of this package's own (``small-area``: North Carolina SIDS counts released privately).

One module per paper (``kazan_reiter``, ``bernstein_sheldon``, ``karwa``, ``alparslan``, ``xiong``);
this package holds the registry of entries and the command, and re-exports every name.
"""

from __future__ import annotations

import time
from pathlib import Path


from ..errors import InputError
from ._common import (Context, Entry, PAPER, Result, _g, _hdi, _markdown, _plt, _run_cells, _seeds)  # noqa: F401
from .kazan_reiter import (KAZAN_PRIOR, _kazan_coverage_unit, run_kazan_coverage, run_kazan_example1)  # noqa: F401
from .bernstein_sheldon import (run_bernstein_calibration)  # noqa: F401
from .karwa import (_karwa_unit, run_karwa_mse)  # noqa: F401
from .alparslan import (ALPARSLAN_METHODS_DEFAULT, ALPARSLAN_METHODS_FULL, UCI_FILES,
                        _alparslan_sim_unit, _alparslan_uci_unit, _point_estimate, load_uci,
                        run_alparslan_simulated, run_alparslan_uci, uci_data_dir)  # noqa: F401
from .xiong import (OUTBREAKS, OUTBREAK_DEFAULT, OUTBREAK_DRAWS, OUTBREAK_MAX_EPOCHS,
                    OUTBREAK_METHOD_COLORS, _examples_dir, _xiong_linreg_unit, _xiong_outbreak_unit,
                    flu_boarding_school, run_xiong_linreg, run_xiong_outbreaks, run_xiong_sir,
                    sir_ode_fit)  # noqa: F401
from .small_area import NC_RHO, nc_sids, nc_sids_geojson, nc_sids_rings, release_counts, run_small_area  # noqa: F401


# =============================================================================== registry and command

ENTRIES: dict[str, Entry] = {e.name: e for e in [
    Entry("kazan-example1", "Kazan & Reiter, Example 1 / Fig. 1",
          "blood-lead release: 95% HPD of (mu, sigma^2), constrained and not", "~15 s", "~3 min",
          run_kazan_example1,
          ("dpposterior.families.gaussian",)),
    Entry("kazan-coverage", "Kazan & Reiter, Fig. 2", "coverage and length of 95% HPD for mu vs n",
          "~5 min", "many hours (10,000 datasets per point)", run_kazan_coverage,
          ("dpposterior.families.gaussian", "dpposterior.diagnostics.gaussian_study")),
    Entry("bernstein-calibration", "Bernstein & Sheldon 2018, Fig. 1a",
          "KS calibration of Gibbs-SS, naive, non-private vs n and epsilon", "~5 min", "~1 h",
          run_bernstein_calibration,
          ("dpposterior.diagnostics.calibration", "dpposterior.families.binomial",
           "dpposterior.families.multinomial", "dpposterior.families.exponential")),
    Entry("karwa-mse", "Karwa, Kifer & Slavkovic, Fig. 1", "squared error of VB, naive, non-private vs epsilon",
          "~1 min", "~10 min", run_karwa_mse,
          ("dpposterior.families.naive_bayes", "dpposterior.inference.naive_bayes_vb")),
    Entry("alparslan-simulated", "Alparslan, Yildirim & Birbil, Fig. 2",
          "estimation MSE vs epsilon, n = 1e5", "~30 s", "several hours", run_alparslan_simulated,
          ("dpposterior.families.linear_regression",)),
    Entry("alparslan-uci", "Alparslan, Yildirim & Birbil, Table 1", "prediction MSE on UCI data at epsilon = 1",
          "~30 s", "~1-2 h", run_alparslan_uci,
          ("dpposterior.families.linear_regression",)),
    Entry("xiong-linreg", "Xiong, Ju & Zhang, Tables 2-4", "posterior means and 95% intervals of beta, 3 epsilons",
          "~10 min", "~1-2 h", run_xiong_linreg,
          ("dpposterior.families.linreg_ju", "dpposterior.sbi.smc_abc", "dpposterior.sbi.sppe",
           "dpposterior.sbi.sple")),
    Entry("xiong-sir", "Xiong, Ju & Zhang, Fig. 1", "SIR posterior from a DP infection trajectory (SPPE)",
          "~3 min", "~30 min", run_xiong_sir,
          ("dpposterior.families.sir", "dpposterior.sbi.sppe")),
    Entry("xiong-outbreaks", "Xiong, Ju & Zhang, Fig. 2", "R0 of five real outbreaks from DP infection curves "
          "(SMC-ABC, SPPE, SPLE)", "~12 min", "many hours", run_xiong_outbreaks,
          ("dpposterior.families.sir", "dpposterior.sbi.smc_abc", "dpposterior.sbi.sppe",
           "dpposterior.sbi.sple")),
    Entry("small-area", "NC SIDS (Cressie & Read 1985), released privately",
          "county SIDS rates from a discrete-Gaussian table: exact-da vs naive vs direct vs the truth",
          "~40 s", "~6 min", run_small_area,
          ("dpposterior.families.small_area", "dpposterior.inference.small_area")),
]}


def list_entries() -> str:
    width = max(len(n) for n in ENTRIES)
    lines = [f"{'name':<{width}}  {'default':>8}  {'--full':<38}  reproduces"]
    for e in ENTRIES.values():
        lines.append(f"{e.name:<{width}}  {e.default_time:>8}  {e.full_time:<38}  {e.paper}: {e.what}")
    lines.append("(times: wall clock on a 2-core machine; the defaults were measured while it was shared, "
                 "see docs/gallery.md)")
    return "\n".join(lines)


def _require(entry: Entry) -> None:
    """Every module the entry runs must import: a missing one is a one-line error before any work."""
    import importlib

    for module in entry.needs:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("dpposterior"):
                raise InputError("engine", f"{entry.name} needs {module}, which is not available in this "
                                 f"installation ({exc.name} is missing)") from None
            raise


def run_entry(name: str, out, full: bool = False, scheduler: str = "processes", quiet: bool = True) -> dict:
    """Run one gallery entry; writes OUT/NAME/{figure.png, table.md, result.json}; returns the result dict."""
    from ..checkpoint import atomic_write_json
    from ..execution import check_scheduler
    from ..files import atomic_path, write_bytes

    if name not in ENTRIES:
        raise InputError("name", f"unknown gallery entry {name!r} (one of: {', '.join(ENTRIES)})")
    check_scheduler(scheduler)
    entry = ENTRIES[name]
    _require(entry)
    folder = Path(out) / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError("out", f"cannot create folder {folder} ({exc.strerror})") from None
    ctx = Context(full=full, out=folder, scheduler=scheduler, quiet=quiet)
    t0 = time.perf_counter()
    result = entry.run(ctx)
    seconds = time.perf_counter() - t0
    plt = _plt()
    try:
        with atomic_path(folder / "figure.png") as tmp:
            result.figure.savefig(tmp, dpi=100, format="png")
    finally:
        plt.close(result.figure)
    scale = "full (--full)" if full else "default"
    md = [f"# {entry.name}: {entry.paper}", "", f"{entry.what}. Scale: {scale}; run time {seconds:.0f} s "
          f"(scheduler {scheduler}).", "", "![figure](figure.png)", "", _markdown(result.header, result.rows)]
    md += [f"- {note}" for note in result.notes]
    write_bytes(folder / "table.md", "\n".join(md) + "\n")
    payload = {"name": name, "paper": entry.paper, "full": full, "seconds": seconds, "header": result.header,
               "rows": [[str(c) for c in row] for row in result.rows], "notes": result.notes, "data": result.data}
    atomic_write_json(folder / "result.json", payload, indent=1, field="out")
    return payload


def reproduce_command(name=None, full: bool = False, list_: bool = False, out=Path("dpposterior-gallery"),
                      scheduler: str = "processes", quiet: bool = False) -> None:
    """``dpposterior reproduce``: see :func:`run_entry` and :func:`list_entries`."""
    if list_:
        print(list_entries())
        return
    if name is None:
        raise InputError("name", f"give a gallery entry (one of: {', '.join(ENTRIES)}) or --list")
    payload = run_entry(name, out, full=full, scheduler=scheduler, quiet=quiet)
    folder = Path(out) / name
    if not quiet:
        print(_markdown(payload["header"], payload["rows"]))
    print(f"wrote {folder / 'figure.png'}, {folder / 'table.md'}, {folder / 'result.json'} "
          f"({payload['seconds']:.0f} s)")
    lines = flag_lines(payload)
    if lines is not None:
        print("\n".join(lines) if lines else "no flags")


def flag_lines(payload: dict) -> list[str] | None:
    """The convergence flags an entry records in its result (``data["flags"]``: method -> warnings of its fit
    on the real data; ``data["semi_synthetic"][method]["flagged_replicates"]``), one line each; None for an
    entry that records none (its engines are not checked for convergence)."""
    data = payload.get("data") or {}
    flags = data.get("flags")
    if not isinstance(flags, dict):
        return None
    lines = [f"flag: {method} on the real data: {message}"
             for method, messages in flags.items() for message in messages or []]
    for method, scores in (data.get("semi_synthetic") or {}).items():
        count = scores.get("flagged_replicates") if isinstance(scores, dict) else None
        if count:
            total = (data.get("scale") or {}).get("replicates", "?")
            lines.append(f"flag: {method}: {count} of {total} semi-synthetic replicates flagged by the convergence "
                         "checks (kept in the scores)")
    return lines


def gallery_markdown(folder, image_prefix: str = "") -> str:
    """docs/gallery.md body from ``folder/NAME/table.md`` of every entry that has been run."""
    parts = []
    for name in ENTRIES:
        table = Path(folder) / name / "table.md"
        if not table.exists():
            parts.append(f"## {name}\n\n_Not run here: see the note at the top._\n")
            continue
        text = table.read_text().replace("](figure.png)", f"]({image_prefix}{name}/figure.png)")
        parts.append(text.replace(f"# {name}:", f"## {name}:", 1))
    return "\n".join(parts)
