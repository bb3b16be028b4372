"""The census NMF reader: the Bureau's parquet layout read into the census family's manifest and rows."""

from __future__ import annotations

import importlib.util
import shutil
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpposterior.errors import InputError
from dpposterior.families.census_nmf import PL94_PERSON, read_nmf
from dpposterior.families.census_table import build_structure

DATA = Path(__file__).parent / "data" / "census_nmf"
PRODUCT = DATA / "US_Person_PL_PROD"


def _make():
    spec = importlib.util.spec_from_file_location("census_nmf_make", DATA / "make.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _read(path=PRODUCT, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return read_nmf(path, **kw)


def _structure(manifest, rows):
    return build_structure(manifest["attributes"], manifest["queries"], manifest["levels"], rows,
                           manifest.get("invariants"), bounds=manifest.get("bounds"))


def _dpq(level, part, query):
    folder = PRODUCT / f"{level}.parquet" / "DPQuery" / f"State={part}"
    table = pq.read_table(next(folder.glob("*.parquet"))).to_pylist()
    return [r for r in table if r["query_name"] == query]


def test_one_branch_reads_into_a_structure():
    with pytest.warns(UserWarning, match="hhinstlevels_dpq"):
        manifest, rows = read_nmf(PRODUCT, state="044")
    assert manifest["family"] == "census" and "measurements" not in manifest
    assert manifest["levels"] == ["state", "county", "tract", "block_group", "block"]
    assert manifest["queries"] == {"total": [], "votingage * hispanic": ["votingage", "hispanic"],
                                   "detailed": ["hhgq", "votingage", "hispanic", "cenrace"],
                                   "hhgq": ["hhgq"]}  # (for the files' hhgq_total bounds)
    assert manifest["attributes"] == PL94_PERSON
    con = pq.read_table(next((PRODUCT / "State.parquet" / "Constraint" / "State=044").glob("*.parquet")))
    total = [r["value"][0] for r in con.to_pylist() if r["query_name"] == "total_con"][0]
    assert manifest["invariants"] == {"state_total": {"44": total}}
    s = _structure(manifest, rows)
    assert list(s.blocks) == ["440070001001001", "440070001001002", "440070001002001", "440090002001001"]
    assert [list(u) for u in s.units[:4]] == [["44"], ["44007", "44009"], ["44007000100", "44009000200"],
                                               ["440070001001", "440070001002", "440090002001"]]
    assert s.bounds.size == len(manifest["bounds"]) == 8 * (1 + len(s.blocks))  # the files' bounds hold together


def test_values_and_variances_round_trip():
    manifest, rows = _read(state="044")
    for r in _dpq("Block", "044", "detailed_dpq"):
        geoid = r["geocode"][-16:-5] + r["geocode"][-4:]
        mine = (rows["level"] == "block") & (rows["geocode"] == geoid) & (rows["query"] == "detailed")
        assert np.array_equal(rows["noisy_value"][mine], r["value"])
        assert np.all(rows["variance"][mine] == r["variance"])
    for r in _dpq("Tract", "044", "total_dpq"):
        mine = (rows["level"] == "tract") & (rows["query"] == "total")
        assert r["value"][0] in rows["noisy_value"][mine] and r["variance"] in rows["variance"][mine]


def test_files_too_large_for_memory_are_refused_before_they_are_read(monkeypatch):
    """The noisy cells counted from the parquet metadata (the value lists' elements) times BYTES_PER_ROW."""
    from dpposterior import memory
    from dpposterior.errors import RefusedError
    from dpposterior.families import census as fc

    _, rows = _read(state="044")
    cells = len(rows["noisy_value"])
    monkeypatch.setattr(memory, "available_bytes", lambda: fc.BYTES_PER_ROW * cells - 1.0)
    with pytest.raises(RefusedError, match="noisy cells") as err:
        _read(state="044")
    assert err.value.field == "path"
    monkeypatch.setattr(memory, "available_bytes", lambda: fc.BYTES_PER_ROW * cells * 2.0)
    assert len(_read(state="044")[1]["noisy_value"]) == cells


def test_multi_attribute_cells_by_hand():
    manifest, rows = _read(state="044")
    (r,) = [r for r in _dpq("County", "044", "votingage * hispanic_dpq") if r["geocode"] == "04410007"]
    a, b, c, d = r["value"]
    mine = (rows["level"] == "county") & (rows["geocode"] == "44007") & (rows["query"] == "votingage * hispanic")
    got = dict(zip(rows["cell"][mine], rows["noisy_value"][mine]))
    assert got == {"17 and under|Not Hispanic or Latino": a, "17 and under|Hispanic or Latino": b,
                   "18 and over|Not Hispanic or Latino": c, "18 and over|Hispanic or Latino": d}
    # detailed: flat index ((hhgq * 2 + votingage) * 2 + hispanic) * 63 + cenrace
    (r,) = [r for r in _dpq("Block", "044", "detailed_dpq") if r["geocode"].endswith("4400700010011002")]
    mine = (rows["level"] == "block") & (rows["geocode"] == "440070001001002") & (rows["query"] == "detailed")
    cells = dict(zip(rows["cell"][mine], rows["noisy_value"][mine]))
    label = "Nursing facilities/Skilled-nursing facilities|18 and over|Not Hispanic or Latino|white-black"
    assert cells[label] == r["value"][((3 * 2 + 1) * 2 + 0) * 63 + 6]
    s = _structure(manifest, rows)
    assert s.cell_labels("detailed")[888] == label


def test_cenrace_labels_follow_the_schema():
    races = PL94_PERSON["cenrace"]
    assert len(races) == 63 and races[:7] == ["white", "black", "aian", "asian", "nhopi", "sor", "white-black"]
    assert races[20] == "nhopi-sor" and races[-1] == "white-black-aian-asian-nhopi-sor"


def test_both_branches_refuse_the_levels_above_tract():
    with pytest.raises(InputError) as err:
        _read(state="44")
    assert err.value.field == "nmf.State" and "state='044' or '144'" in str(err.value)
    manifest, rows = _read(levels=["US", "Tract", "block"])
    assert manifest["levels"] == ["us", "tract", "block"]
    s = _structure(manifest, rows)
    assert s.B == 5 and list(s.units[0]) == [""] and set(manifest["invariants"]) == {"us_total"}


def test_optimized_block_groups_are_refused(tmp_path):
    product = _make().write_release(tmp_path, optimized_block_groups=True)
    with pytest.raises(InputError) as err:
        _read(product, state="044")
    assert err.value.field == "nmf.Block_Group" and "optimized block groups" in str(err.value)
    manifest, rows = _read(product, state="044", levels=["State", "County", "Tract", "Block"])
    assert _structure(manifest, rows).L == 4


def test_a_single_file_is_placed_by_its_folders():
    f = next((PRODUCT / "Block.parquet" / "DPQuery" / "State=144").glob("*.parquet"))
    manifest, rows = _read(f)
    assert manifest["levels"] == ["block"] and set(rows["geocode"]) == {"440090003001003"}


def _rewrite(path: Path, change):
    f = next(path.glob("*.parquet"))
    table = change(pq.read_table(f))
    f.unlink()
    pq.write_table(table, path / "part-00000.parquet")


@pytest.fixture
def copy(tmp_path):
    return Path(shutil.copytree(PRODUCT, tmp_path / "US_Person_PL_PROD"))


def test_missing_column(copy):
    _rewrite(copy / "Tract.parquet" / "DPQuery" / "State=044", lambda t: t.drop_columns(["variance"]))
    with pytest.raises(InputError) as err:
        _read(copy, state="044")
    assert err.value.field == "nmf.variance" and "Tract.parquet" in str(err.value)


def test_unknown_geolevel(copy):
    (copy / "Block_Group.parquet").rename(copy / "Optimized_Block_Group.parquet")
    with pytest.raises(InputError) as err:
        _read(copy)
    assert err.value.field == "nmf.geolevel" and "Optimized_Block_Group" in str(err.value)
    with pytest.raises(InputError) as err:
        _read(copy, levels=["Tract_Group"])
    assert err.value.field == "levels[0]"
    manifest, _ = _read(copy, state="144", levels=["Tract", "Block"])
    assert manifest["levels"] == ["tract", "block"]


def test_wrong_geocode_length(copy):
    def shorten(t):
        codes = [g[:-1] for g in t.column("geocode").to_pylist()]
        return t.set_column(t.schema.get_field_index("geocode"), "geocode", pa.array(codes))

    _rewrite(copy / "County.parquet" / "DPQuery" / "State=044", shorten)
    with pytest.raises(InputError) as err:
        _read(copy, state="044")
    assert err.value.field == "nmf.geocode" and "County" in str(err.value) and "7 digits" in str(err.value)


def test_bad_state_and_path(tmp_path):
    for bad in ("4x", "0444", True):
        with pytest.raises(InputError) as err:
            _read(state=bad)
        assert err.value.field == "state"
    with pytest.raises(InputError) as err:
        _read(state="06")
    assert err.value.field == "state" and "044" in str(err.value)
    with pytest.raises(InputError) as err:
        _read(tmp_path / "absent")
    assert err.value.field == "path"


def test_attributes_map_renames_and_relabels():
    manifest, rows = _read(state="144", attributes_map={
        "votingage": {"name": "age", "labels": ["under 18", "18+"]}, "hispanic": "hisp"})
    assert list(manifest["attributes"]) == ["hhgq", "age", "hisp", "cenrace"]
    assert manifest["queries"]["votingage * hispanic"] == ["age", "hisp"]
    assert "18+|Hispanic or Latino" in set(rows["cell"])
    _structure(manifest, rows)
    with pytest.raises(InputError) as err:
        _read(state="144", attributes_map={"age": "x"})
    assert err.value.field == "attributes_map.age"
    with pytest.raises(InputError) as err:
        _read(state="144", attributes_map={"votingage": ["a", "b", "c"]})
    assert err.value.field == "attributes_map.votingage"


def test_nurse_nva_0_becomes_a_structural_zero(tmp_path):
    """A ``nurse_nva_0_con`` Constraint row (the PL94 schema's structural zero: no minors in nursing facilities) is
    read as the manifest's structural_zeros, in the manifest's (renamed) attributes; a nonzero value is refused."""
    root = tmp_path / "US_Person_PL_PROD"
    shutil.copytree(PRODUCT, root)
    path = next((root / "Block.parquet" / "Constraint" / "State=044").glob("*.parquet"))
    table = pq.read_table(path)
    block = table.column("geocode")[0].as_py()
    rows = table.to_pylist() + [{"geocode": block, "query_name": "nurse_nva_0_con", "value": [0], "sign": "=",
                                 "query_shape": [1, 1, 1, 1]}]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    manifest, rows = _read(root, state="044", levels=["Block"])
    assert manifest["structural_zeros"] == [{"hhgq": PL94_PERSON["hhgq"][3], "votingage": "17 and under"}]
    s = build_structure(manifest["attributes"], manifest["queries"], manifest["levels"], rows,
                        structural_zeros=manifest["structural_zeros"])
    assert s.structural_zero.sum() == 2 * 63
    renamed, _ = _read(root, state="044", levels=["Block"], attributes_map={"votingage": "age"})
    assert renamed["structural_zeros"] == [{"hhgq": PL94_PERSON["hhgq"][3], "age": "17 and under"}]
    assert "structural_zeros" not in _read(PRODUCT, state="044", levels=["Block"])[0]
    bad = pq.read_table(path).to_pylist()
    bad[-1]["value"] = [2]
    pq.write_table(pa.Table.from_pylist(bad, schema=table.schema), path)
    with pytest.raises(InputError) as err:
        _read(root, state="044", levels=["Block"])
    assert err.value.field == "nmf.value" and "nurse_nva_0_con" in err.value.reason


def test_hhgq_total_bounds_become_bounds_on_the_hhgq_query(tmp_path):
    """``hhgq_total_lb_con`` / ``hhgq_total_ub_con`` Constraint rows (the DAS's bounds on each group-quarters
    type's population, a vector over the 8 hhgq categories) are read as the manifest's bounds on an ``hhgq`` query,
    element k bounding category k; they index into a structure; a value of the wrong length is refused."""
    root = tmp_path / "US_Person_PL_PROD"
    shutil.copytree(PRODUCT, root)
    written = {}
    for level in ("State", "Block"):
        path = next((root / f"{level}.parquet" / "Constraint" / "State=044").glob("*.parquet"))
        table = pq.read_table(path)
        rows = table.to_pylist()
        for i, r in enumerate(rows):
            if r["query_name"] == "hhgq_total_lb_con":
                r["value"] = [0 if k == 5 else k % 3 for k in range(8)]
            elif r["query_name"] == "hhgq_total_ub_con":
                r["value"] = [0 if k == 5 else k % 3 + 4 + i for k in range(8)]
            written[(level, r["geocode"], r["query_name"])] = r["value"]
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    manifest, rows = _read(root, state="044")
    assert manifest["queries"]["hhgq"] == ["hhgq"]
    bounds = manifest["bounds"]
    blocks = [g for (lv, g, q) in written if lv == "Block" and q == "hhgq_total_lb_con"]
    assert len(bounds) == 8 * (len(blocks) + 1)
    das = blocks[0]
    geoid = das[-16:-5] + das[-4:]
    mine = [b for b in bounds if b["level"] == "block" and b["geocode"] == geoid]
    assert [b["cell"] for b in mine] == PL94_PERSON["hhgq"]
    assert [b["lower"] for b in mine] == written[("Block", das, "hhgq_total_lb_con")]
    assert [b["upper"] for b in mine] == written[("Block", das, "hhgq_total_ub_con")]
    assert {b["geocode"] for b in bounds if b["level"] == "state"} == {"44"}
    s = build_structure(manifest["attributes"], manifest["queries"], manifest["levels"], rows,
                        manifest.get("invariants"), bounds=bounds)
    assert s.bounds.size == len(bounds) and s.bounds.upper[s.bounds.cell == 5].max() == 0
    path = next((root / "Block.parquet" / "Constraint" / "State=044").glob("*.parquet"))
    bad = pq.read_table(path).to_pylist()
    next(r for r in bad if r["query_name"] == "hhgq_total_ub_con")["value"] = [1, 2, 3]
    pq.write_table(pa.Table.from_pylist(bad, schema=pq.read_table(path).schema), path)
    with pytest.raises(InputError) as err:
        _read(root, state="044", levels=["Block"])
    assert err.value.field == "nmf.value" and "one per hhgq category" in err.value.reason
