"""Command-line interface: ``dpposterior release | infer | audit | demo | calibrate | report | reproduce | marginal |
synthesize | tabulate``.

Every bad input ends in one line on stderr, ``error: FIELD: REASON``, and exit
code 2 -- never a traceback.  Contracts (option names) are documented in
``docs/cli.md``; other issues and outside checks rely on them.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import List, Optional, Tuple

import typer

try:  # recent typer vendors click as typer._click; older typer uses click itself
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover
    from click import exceptions as click_exc

from .errors import InputError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  rich_markup_mode=None,
                  help="Valid Bayesian inference from differentially private releases.")


#: every family name, for help texts (kept in sync with the registry: families.FAMILY_MODULES)
def _family_names() -> str:
    from .families import FAMILY_MODULES

    return ", ".join(FAMILY_MODULES)


_FAMILY_LIST = _family_names()
_WORKERS_HELP = "Worker processes (default: one per CPU; for tcp://, the cluster size used to size work units)."


def _split(value: Optional[str]) -> Optional[list[str]]:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def _impl(module: str, func: str):
    """Import ``dpposterior.<module>.<func>``; a missing piece is a clear error, not a traceback."""
    try:
        mod = importlib.import_module(f"dpposterior.{module}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("dpposterior"):
            raise InputError("command", f"dpposterior.{module} is not available in this version") from None
        raise
    return getattr(mod, func)


@app.command("release")
def release_cmd(
    data: Optional[Path] = typer.Argument(None, help="CSV of confidential records (with a header row); omit with "
                                          "--from-measurements."),
    family: str = typer.Option(..., "--family", help=f"Data model: {_FAMILY_LIST}."),
    epsilon: Optional[float] = typer.Option(None, "--epsilon",
                                            help="Total privacy budget (per table for naive-bayes counts)."),
    out: Path = typer.Option(..., "--out", help="Release file to write (JSON)."),
    rho: Optional[float] = typer.Option(None, "--rho", help="zCDP budget of --mechanism discrete-gaussian or "
                                        "skellam (instead of --epsilon)."),
    target_epsilon: Optional[float] = typer.Option(None, "--target-epsilon", help="Instead of --epsilon/--rho: the "
                                                   "smallest noise whose tight epsilon for the whole release is at "
                                                   "most this (at --delta, or the default delta)."),
    target_rho: Optional[float] = typer.Option(None, "--target-rho", help="Instead of --rho: the smallest "
                                               "discrete-Gaussian noise whose whole-release rho is at most this."),
    column: Optional[str] = typer.Option(None, "--column", help="The data column (univariate families)."),
    columns: Optional[str] = typer.Option(None, "--columns", help="Comma-separated columns (naive-bayes: class first)."),
    features: Optional[str] = typer.Option(None, "--features", help="Comma-separated feature columns (regression)."),
    response: Optional[str] = typer.Option(None, "--response", help="Response column (regression)."),
    bounds: Optional[Tuple[float, float]] = typer.Option(None, "--bounds", help="Clamping / truncation bounds LO HI."),
    x_norm: Optional[float] = typer.Option(None, "--x-norm", help="Public bound on the row norm of x (regression)."),
    y_abs: Optional[float] = typer.Option(None, "--y-abs", help="Public bound on |y| (regression)."),
    epsilon_split: Optional[str] = typer.Option(None, "--epsilon-split",
                                                help="How epsilon is split between statistics."),
    delta: Optional[float] = typer.Option(None, "--delta", help="delta of (epsilon, delta)-DP mechanisms; with "
                                          "--target-epsilon, where the release reports its epsilon."),
    mechanism: Optional[str] = typer.Option(None, "--mechanism", help="laplace or gaussian, where a family offers "
                                            "both; discrete-laplace or discrete-gaussian for counts."),
    scale: Optional[str] = typer.Option(None, "--scale", help="naive-bayes: counts or proportions."),
    parties: int = typer.Option(1, "--parties", help="Split the rows into J data holders (regression)."),
    intercept: bool = typer.Option(False, "--intercept", help="Add an intercept column (regression)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed: numpy noise (reproducible) instead of OpenDP."),
    population: Optional[str] = typer.Option(None, "--population", help="sir: the public population size K."),
    times: Optional[str] = typer.Option(None, "--times", help="sir: comma-separated time grid, one per data row."),
    trials: Optional[str] = typer.Option(None, "--trials", help="sir: binomial trials N (default 1000)."),
    design: Optional[Path] = typer.Option(None, "--design",
                                          help="linreg-ju: public design JSON (x_mean, x_cov, noise_variance, "
                                               "clamp); default Xiong et al.'s."),
    area_column: Optional[str] = typer.Option(None, "--area-column", help="small-area: the area id column."),
    cell_column: Optional[str] = typer.Option(None, "--cell-column", help="small-area: the cell (category) column."),
    exposure: Optional[Path] = typer.Option(None, "--exposure", help="small-area: public CSV of area, exposure."),
    postprocessing: Optional[str] = typer.Option(None, "--postprocessing",
                                                 help="small-area: none or nonnegative (released max(0, y + e))."),
    areas: Optional[Path] = typer.Option(None, "--areas", help="small-area: public list of areas, one per line "
                                         "(or a CSV with an 'area' column)."),
    cells: Optional[Path] = typer.Option(None, "--cells", help="small-area: public list of cells, one per line "
                                         "(or a CSV with a 'cell' column)."),
    drop_missing: bool = typer.Option(False, "--drop-missing", help="Leave out rows with a missing value in a "
                                      "column read (default: refuse them)."),
    cliques: Optional[str] = typer.Option(None, "--cliques", help="marginals: the marginals to release, attributes "
                                          "by commas, cliques by semicolons (\"age,income;sex\"), or mst (all "
                                          "one-way marginals and a privately chosen tree of two-way ones)."),
    max_cells: Optional[int] = typer.Option(None, "--max-cells", help="marginals, with --cliques mst: choose only "
                                            "pairs whose two-way table has at most this many cells."),
    from_measurements: Optional[Path] = typer.Option(None, "--from-measurements", help="small-area: a long-format "
                                                     "CSV of noisy measurements (area, cell, noisy_value, "
                                                     "noise_variance) written as a release, adding no noise."),
    parents: Optional[Path] = typer.Option(None, "--parents", help="small-area, with --from-measurements: public "
                                           "CSV of each area's parent (columns area, parent; e.g. tract -> "
                                           "county)."),
):
    """Curator: clamp, compute statistics, add DP noise, write a release file (never a data row)."""
    import warnings

    from .curator import CurateOptions, build_release, read_exposure, read_public_list
    from .errors import CuratorWarning, check_output_path

    if from_measurements is not None:
        given = {"data CSV": data, "epsilon": epsilon, "rho": rho, "target-epsilon": target_epsilon,
                 "target-rho": target_rho, "delta": delta, "seed": seed, "column": column, "columns": columns,
                 "features": features, "response": response, "bounds": bounds, "x-norm": x_norm, "y-abs": y_abs,
                 "epsilon-split": epsilon_split, "scale": scale, "parties": parties if parties != 1 else None,
                 "intercept": intercept or None, "population": population, "times": times, "trials": trials,
                 "design": design, "area-column": area_column, "cell-column": cell_column, "areas": areas,
                 "cells": cells, "drop-missing": drop_missing or None, "cliques": cliques,
                 "max-cells": max_cells}
        return _release_from_measurements(from_measurements, family, out, mechanism, exposure, postprocessing,
                                          given, parents)
    if parents is not None:
        raise InputError("parents", "is read with --from-measurements only (the curator's records give no "
                         "hierarchy)")
    if data is None:
        raise InputError("data", "give the CSV of confidential records (or --from-measurements FILE.csv for a "
                         "small-area table that is already noisy)")
    check_output_path(out, "--out")
    # None: not given (the family's curator refuses a given option it does not take; --parties 1 and no
    # --intercept are what every curator does anyway)
    options = CurateOptions(
        family, epsilon=epsilon, rho=rho, target_epsilon=target_epsilon, target_rho=target_rho, column=column, columns=_split(columns), features=_split(features),
        response=response, bounds=tuple(bounds) if bounds else None, x_norm=x_norm, y_abs=y_abs,
        epsilon_split=epsilon_split, delta=delta, mechanism=mechanism, scale=scale,
        parties=parties if parties != 1 else None, intercept=intercept or None, seed=seed, population=population,
        trials=trials, times=times, design=design, area_column=area_column, cell_column=cell_column,
        postprocessing=postprocessing, exposure=read_exposure(exposure) if exposure is not None else None,
        areas=read_public_list(areas, "area") if areas is not None else None,
        cells=read_public_list(cells, "cell") if cells is not None else None, drop_missing=drop_missing or None,
        cliques=cliques, max_cells=max_cells,
    )
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", CuratorWarning)
        release = build_release(data, options)
    for warning in said:  # the curator's notes to whoever runs it (never released)
        if issubclass(warning.category, CuratorWarning):
            typer.echo(f"warning: {warning.message}", err=True)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    release.save(out)
    cost = release.privacy()
    typer.echo(f"wrote {out} (family {release.family}, total {cost.describe()}, neighbouring {release.neighbouring})")
    if seed is not None:
        from .mechanisms.noise import SEEDED_INTEGER_NOTE

        if SEEDED_INTEGER_NOTE in release.to_json():  # integer noise: an exact sampler, but a seeded generator
            typer.echo("note: --seed draws integer noise from a seeded numpy generator: reproducible, not for "
                       "publication; omit --seed for the exact publication samplers (OpenDP's)", err=True)
        else:
            typer.echo("note: --seed draws numpy floating-point noise: reproducible, not for publication "
                       "(Mironov 2012); omit --seed for the exact publication samplers (OpenDP's)", err=True)


def _release_from_measurements(path, family, out, mechanism, exposure, postprocessing, given: dict,
                               parents=None) -> None:
    """``release --from-measurements``: the measurements are already noisy, so no budget, seed or data CSV
    applies; each is refused in one line."""
    for name, value in given.items():
        if value is None:
            continue
        if name == "data CSV":
            raise InputError("from-measurements", "takes no data CSV: the measurements are already noisy "
                             "(give one or the other)")
        if name in ("epsilon", "rho", "target-epsilon", "target-rho", "delta", "seed"):
            raise InputError(name, "not an option of --from-measurements (the measurements are already noisy: no "
                             "noise is added, and the noise they state gives the privacy statement)")
        raise InputError(name, "not an option of --from-measurements (it takes --exposure, --parents, "
                         "--postprocessing and --mechanism discrete-gaussian)")
    from .curator_api import release_from_measurements
    from .errors import check_output_path

    check_output_path(out, "--out")
    release = release_from_measurements(path, family, out, mechanism=mechanism, exposure=exposure, parents=parents,
                                        postprocessing=postprocessing)
    cost = release.privacy()
    typer.echo(f"wrote {out} (family {release.family}, total {cost.describe()}, neighbouring {release.neighbouring})")
    typer.echo(f"note: no noise was added: the measurements in {path} are already noisy; the privacy statement "
               "rests on the noise variances they state", err=True)


@app.command("infer")
def infer_cmd(
    release: Optional[Path] = typer.Argument(None, help="Release file (JSON); omit with --model."),
    out: Path = typer.Option(..., "--out", help="Posterior to write (ArviZ netCDF)."),
    model: Optional[str] = typer.Option(None, "--model", help="FILE.py:NAME: a dpposterior.Model instead of a "
                                        "release file (docs/models.md)."),
    observed: Optional[str] = typer.Option(None, "--observed", help="With --model: the released values, "
                                           "comma-separated."),
    analysis: Optional[Path] = typer.Option(None, "--analysis", help="Analysis file (TOML)."),
    method: Optional[str] = typer.Option(None, "--method", help="Engine; overrides the analysis file."),
    draws: Optional[int] = typer.Option(None, "--draws", help="Draws per chain."),
    warmup: Optional[int] = typer.Option(None, "--warmup", help="Warm-up iterations per chain."),
    chains: Optional[int] = typer.Option(None, "--chains", help="Number of chains."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Random seed."),
    simulations: Optional[int] = typer.Option(None, "--simulations", help="SBI: simulations per round (SMC-ABC: total)."),
    rounds: Optional[int] = typer.Option(None, "--rounds", help="SBI: number of rounds."),
    rqmc_points: Optional[int] = typer.Option(None, "--rqmc-points", help="SBI: RQMC replicates per simulation."),
    device: Optional[str] = typer.Option(None, "--device", help="SBI flows (sppe, sple): cpu, cuda or auto (CUDA when present)."),
    training: Optional[str] = typer.Option(None, "--training", help="SPPE training preset: fast (default with the "
                                           "importance correction) or paper (default with --correction none); "
                                           "docs/sbi.md."),
    correction: Optional[str] = typer.Option(None, "--correction", help="SPPE: auto (default: weight all rounds' "
                                             "simulations with the mechanism's density unless too few count), "
                                             "importance (always) or none (the last flow); docs/sbi.md."),
    scheduler: str = typer.Option("serial", "--scheduler", help="serial, processes, local or tcp://HOST:PORT."),
    workers: Optional[int] = typer.Option(None, "--workers", help=_WORKERS_HELP),
    quiet: bool = typer.Option(False, "--quiet", help="No progress output."),
    naive: Optional[bool] = typer.Option(
        None, "--naive/--no-naive",
        help="Also compute and print the noise-ignoring posterior for comparison (default: on where it is "
             "cheap; off for simulation-based families, where it trains a flow)."),
):
    """Analyst: the noise-aware posterior of a release, written as ArviZ netCDF."""
    if model is not None or observed is not None:  # a user model: model_commands.py
        return _impl("model_commands", "infer_model_command")(
            model, observed, release, out, analysis=analysis, method=method, draws=draws, warmup=warmup,
            chains=chains, seed=seed, quiet=quiet, simulations=simulations, rounds=rounds, rqmc_points=rqmc_points,
            device=device, training=training, correction=correction)
    if release is None:
        raise InputError("release", "give a release file, or --model FILE.py:NAME with --observed")
    from .analysis import load_analysis
    from .errors import check_output_path, check_seed
    from .execution import check_scheduler
    from .api import infer, naive_companion
    from .release import load_release
    from .console import print_result

    check_output_path(out, "--out")  # before any work: never lose a computed posterior
    check_seed(seed, "--seed")
    check_scheduler(scheduler, reachable=True)  # an unreachable cluster is refused even if unused
    rel = load_release(release)
    family = rel.family_entry
    kwargs = load_analysis(analysis, family) if analysis is not None else {}
    if not rel.is_dp:
        typer.echo(f"note: this release is NOT (epsilon, delta)-DP: {rel.not_dp}", err=True)
    for key, value in (("method", method), ("draws", draws), ("warmup", warmup), ("chains", chains),
                       ("seed", seed), ("simulations", simulations), ("rounds", rounds),
                       ("rqmc_points", rqmc_points), ("device", device), ("training", training),
                       ("correction", correction)):
        if value is not None:
            kwargs[key] = value
    from .console import posterior_warnings_only
    from .execution import use_workers

    from .console import phase

    with phase(f"infer: {rel.family}" + (f", method {kwargs['method']}" if kwargs.get('method') else ""), quiet), \
            use_workers(workers), posterior_warnings_only():
        post = infer(rel, quiet=quiet, scheduler=scheduler, **kwargs)
    if naive is None:
        naive = family.naive_by_default
    naive_post = None
    if naive and family.naive_method and family.naive_method != post.method:
        if not quiet:
            typer.echo(f"computing the naive (noise-ignoring) posterior for comparison, method "
                       f"{family.naive_method} (--no-naive skips it)", err=True)
        with phase(f"infer: naive posterior, method {family.naive_method}", quiet):
            naive_post, _ = naive_companion(rel, kwargs.get("prior"), main_method=post.method,
                                            seed=kwargs.get("seed"), draws=kwargs.get("draws"),
                                            chains=kwargs.get("chains"), constrained=kwargs.get("constrained"),
                                            quiet=quiet)
    with phase(f"infer: writing {out}", quiet):
        post.to_netcdf(out)
    print_result(post, out, naive=naive_post)


@app.command("audit")
def audit_cmd(
    family: str = typer.Option(..., "--family", help="Curator to audit (a family name, or 'all')."),
    epsilon: float = typer.Option(1.0, "--epsilon", help="Budget the audited curator is run at."),
    draws: int = typer.Option(2000, "--draws", help="Releases drawn from each of D and D' per sampler."),
    confidence: float = typer.Option(0.95, "--confidence", help="Confidence of the empirical epsilon lower bound."),
    seed: int = typer.Option(0, "--seed", help="Seed of the search and of the numpy sampler's draws."),
    samplers: str = typer.Option("numpy,opendp", "--samplers", help="Curator paths to draw through."),
    restarts: int = typer.Option(4, "--restarts", help="Random restarts of the sensitivity search per statistic."),
    bases: int = typer.Option(6, "--bases", help="Base data sets around the replaced record in the search."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the results as JSON."),
    quiet: bool = typer.Option(False, "--quiet", help="No table."),
):
    """Privacy audit of a curator: searched vs recorded sensitivity, empirical vs claimed epsilon."""
    from .privacy import audit_command

    code = audit_command(family, epsilon, draws, confidence, seed, out, tuple(_split(samplers) or ()), restarts,
                         quiet=quiet, bases=bases)
    if code:
        raise typer.Exit(code)


@app.command("demo")
def demo_cmd(out: Path = typer.Option(Path("dpposterior-demo"), "--out", help="Output folder.")):
    """Run the bundled blood-lead example (Kazan & Reiter, Example 1)."""
    _impl("demo", "run_demo")(out)


@app.command("calibrate")
def calibrate_cmd(
    family: Optional[str] = typer.Option(None, "--family", help=f"Data model to simulate: {_FAMILY_LIST} "
                                                                 "(or --model)."),
    n: Optional[int] = typer.Option(None, "--n", help="Records per simulated dataset (a --model has its own)."),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="Privacy budget of each simulated release "
                                            "(a --model has its own mechanism)."),
    mechanism: Optional[str] = typer.Option(None, "--mechanism", help="Release the simulated data through this "
                                            "mechanism (count families: laplace, discrete-laplace with --epsilon, "
                                            "discrete-gaussian or skellam with --rho, or a registered integer "
                                            "noise law; default: the family's own)."),
    rho: Optional[float] = typer.Option(None, "--rho", help="zCDP budget of --mechanism discrete-gaussian or "
                                        "skellam (instead of --epsilon)."),
    model: Optional[str] = typer.Option(None, "--model", help="FILE.py:NAME: calibrate a dpposterior.Model "
                                        "instead of a family."),
    trials: int = typer.Option(..., "--trials", help="Number of simulated datasets."),
    methods: Optional[str] = typer.Option(None, "--methods", help="Comma-separated methods (default: auto and the "
                                          "family's naive method, where it has one)."),
    prior: Optional[str] = typer.Option(None, "--prior", help="Prior: a TOML file or inline 'kind=beta,alpha=1,beta=1'."),
    seed: int = typer.Option(0, "--seed", help="Seed of the whole study (trial t uses its own child seed)."),
    draws: Optional[int] = typer.Option(None, "--draws", help="Posterior draws per trial."),
    out: Optional[Path] = typer.Option(None, "--out", help="Result JSON."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Rank ECDF plot (PNG)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="serial, processes, local or "
                                            "tcp://HOST:PORT (default: processes; a --model runs serially)."),
    workers: Optional[int] = typer.Option(None, "--workers", help=_WORKERS_HELP),
    unit_size: Optional[int] = typer.Option(None, "--unit-size", help="Trials per work unit (default: sized from trials and workers; results do not depend on it)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress output (the result table is still printed "
                                                       "when there is no --out)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the checkpoint beside --out (every unit "
                                "is verified first)."),
    repair: bool = typer.Option(False, "--repair", help="With --resume: recompute the checkpoint's units that "
                                "fail verification instead of refusing them."),
    worker_timeout: Optional[float] = typer.Option(None, "--worker-timeout", help="Dask: seconds with no worker "
                                                   "connected before giving up (default 120)."),
):
    """Simulation-based calibration of inference methods (posterior quantile ranks)."""
    if model is not None:  # a user model: its own n and mechanism, trials run serially
        if family is not None or n is not None or epsilon is not None or mechanism is not None or rho is not None:
            raise InputError("--model", "replaces --family, --n, --epsilon, --mechanism and --rho (the model has "
                             "its own)")
        # a Model's callables cannot be sent to worker processes: its trials run serially, so the
        # options that steer workers or the family's prior would be silently ignored -- refuse them
        for name, value in (("--prior", prior), ("--workers", workers), ("--unit-size", unit_size),
                            ("--resume", resume or None), ("--repair", repair or None),
                            ("--worker-timeout", worker_timeout)):
            if value is not None:
                raise InputError(name, "not an option of calibrate --model (a Model's trials run serially with "
                                 "its own prior)")
        if scheduler not in (None, "serial"):
            raise InputError("--scheduler", f"{scheduler!r}: calibrate --model runs serially (a Model's callables "
                             "cannot be sent to workers)")
        _impl("model_commands", "calibrate_model_command")(
            model, trials, methods=["auto"] if methods in (None, "auto,naive") else _split(methods), seed=seed, draws=draws,
            out=out, plot=plot, quiet=quiet)
        return
    _impl("diagnostics.calibration", "calibrate_command")(
        family=family, n=n, epsilon=epsilon, trials=trials, methods=_split(methods), prior=prior, seed=seed,
        draws=draws, out=out, plot=plot, scheduler=scheduler or "processes", quiet=quiet, resume=resume,
        workers=workers, unit_size=unit_size, repair=repair, worker_timeout=worker_timeout, mechanism=mechanism,
        rho=rho)


@app.command("report")
def report_cmd(
    posterior: Path = typer.Argument(..., help="Posterior (netCDF) or calibration result (JSON)."),
    out: Path = typer.Option(..., "--out", help="Output folder."),
    compare: Optional[List[Path]] = typer.Option(None, "--compare", help="Other posteriors to overlay."),
    model: Optional[str] = typer.Option(None, "--model", help="FILE.py:NAME: overlay the prior of the "
                                        "dpposterior.Model the posterior came from."),
    geometry: Optional[Path] = typer.Option(None, "--geometry", help="GeoJSON outlines of the areas (small-area): "
                                            "maps of the rates' medians and interval widths."),
    geometry_key: Optional[str] = typer.Option(None, "--geometry-key", help="The feature property holding the area "
                                               "ids (default: id, GEOID, FIPS, name, ... or the feature id)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress output."),
):
    """Write PNG figures and a self-contained report.html."""
    from .console import phase

    with phase(f"report: {posterior.name}", quiet):
        if model is not None:  # a user model: its prior beside the posterior
            if geometry is not None or geometry_key is not None:
                raise InputError("geometry", "maps are drawn for a small-area posterior, not a --model one")
            html = _impl("model_commands", "report_model_command")(posterior, out, compare, model)
        else:
            html = _impl("report", "write_report")(posterior, out, compare=list(compare or []), geometry=geometry,
                                                   geometry_key=geometry_key)
    typer.echo(f"wrote {html}")


@app.command("marginal")
def marginal_cmd(
    posterior: Path = typer.Argument(..., help="Posterior (netCDF) of a marginals release."),
    attributes: str = typer.Option(..., "--attributes", help="Comma-separated attributes of the marginal "
                                   "(measured or not)."),
    out: Path = typer.Option(..., "--out", help="CSV to write: one row per cell, its median and interval."),
    level: float = typer.Option(0.9, "--level", help="Probability of the central interval."),
    counts: bool = typer.Option(False, "--counts", help="Counts (n times the probabilities) instead of "
                                "probabilities."),
):
    """The posterior of any marginal table: median and central interval per cell."""
    path = _impl("marginals_commands", "marginal_command")(posterior, attributes, out, level, counts)
    typer.echo(f"wrote {path}")


@app.command("synthesize")
def synthesize_cmd(
    posterior: Path = typer.Argument(..., help="Posterior (netCDF) of a marginals release."),
    m: int = typer.Option(10, "--m", help="Number of synthetic data sets (one posterior draw each)."),
    out: Path = typer.Option(..., "--out", help="Folder to write synthetic-1.csv ... synthetic-M.csv into."),
    rows: Optional[int] = typer.Option(None, "--rows", help="Rows per data set (default: the release's n)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the draws and the rows."),
):
    """Noise-aware synthetic data: M data sets from the posterior predictive (analyse each; combine with
    dpposterior.combine)."""
    paths = _impl("marginals_commands", "synthesize_command")(posterior, m, out, rows, seed)
    typer.echo(f"wrote {len(paths)} data sets to {out}")


@app.command("tabulate")
def tabulate_cmd(
    posterior: Path = typer.Argument(..., help="Posterior (netCDF) of a census release."),
    out: Path = typer.Option(..., "--out", help="CSV to write: one row per geounit (or union) and query cell."),
    level: Optional[str] = typer.Option(None, "--level", help="Every geounit of this level: state, county, tract, "
                                        "block_group or block."),
    query: str = typer.Option("total", "--query", help="The query (a marginal of the histogram) whose cells to "
                              "tabulate."),
    union: Optional[Path] = typer.Option(None, "--union", help="CSV with columns union, geocode (one row per member "
                                         "block or GEOID prefix): each union's totals instead of a level."),
    at_least: Optional[List[int]] = typer.Option(None, "--at-least", help="With --union: also P(count >= K) "
                                                 "(repeat for several K)."),
    interval: float = typer.Option(0.9, "--interval", help="Posterior probability the interval holds."),
    interval_kind: str = typer.Option("hpd", "--interval-kind", help="hpd: the shortest interval holding it "
                                      "(one-sided where the mass piles at zero); equal-tailed: between the "
                                      "quantiles (1 -/+ interval) / 2."),
):
    """Posterior persons of every geounit of a level, or of unions of blocks (districts), by query cell: mean,
    median and credible interval (and threshold probabilities for unions)."""
    path = _impl("census", "tabulate_command")(posterior, out, level, query, union, list(at_least or []), interval,
                                                interval_kind)
    typer.echo(f"wrote {path}")


@app.command("reproduce")
def reproduce_cmd(
    name: Optional[str] = typer.Argument(None, help="Gallery entry (see --list)."),
    full: bool = typer.Option(False, "--full", help="The paper's full scale."),
    list_: bool = typer.Option(False, "--list", help="List the entries with expected run times."),
    out: Path = typer.Option(Path("dpposterior-gallery"), "--out", help="Output folder."),
    scheduler: str = typer.Option("processes", "--scheduler", help="serial, processes, local or tcp://HOST:PORT."),
    workers: Optional[int] = typer.Option(None, "--workers", help=_WORKERS_HELP),
    quiet: bool = typer.Option(False, "--quiet", help="No progress output."),
):
    """Rerun one headline result of a paper; writes its figure and a side-by-side table."""
    from .execution import use_workers

    from .console import phase

    with phase(f"reproduce {name}" + (" --full" if full else ""), quiet or list_ or name is None), \
            use_workers(workers):
        _impl("gallery", "reproduce_command")(name=name, full=full, list_=list_, out=out, scheduler=scheduler,
                                              quiet=quiet)


def main(argv: list[str] | None = None) -> int:
    """Console entry point; turns every input problem into one line and exit code 2."""
    command = typer.main.get_command(app)
    try:
        # without standalone mode click returns a command's typer.Exit code instead of raising it
        # (audit's 1 when a check fails): it must reach the exit status, not be dropped
        from .errors import posterior_warnings_ignored

        with posterior_warnings_ignored():  # the commands print each flag as 'warning: ...' themselves
            code = command.main(args=argv, prog_name="dpposterior", standalone_mode=False)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _exit(2)
    except click_exc.NoArgsIsHelpError:
        return _exit(0)
    except click_exc.UsageError as exc:
        param = getattr(exc, "param", None)
        msg = exc.format_message().replace("\n", " ")
        print(f"error: {msg}" if param is None or str(param.name) in msg else f"error: {param.name}: {msg}",
              file=sys.stderr)
        return _exit(2)
    except typer.Exit as exc:
        return _exit(exc.exit_code)
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        return _exit(130)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return _exit(130)
    return _exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)


def _exit(code) -> int:
    return int(code or 0)
