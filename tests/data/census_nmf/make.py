"""Writes a tiny noisy measurement file in the Bureau's parquet layout (``dpposterior.families.census_nmf``):
``US_Person_PL_PROD/<Level>.parquet/{DPQuery,Constraint}/State=<code>/part-*.parquet``.

Five blocks of Rhode Island (state 44) on a DAS-style spine: four in the state's non-AIAN branch (spine state
``044``; county 007 tract 000100 blocks 1001, 1002, 2001, county 009 tract 000200 block 1001) and one in its AIAN
branch (``144``; county 009 tract 000300 block 1003).  Spine geocodes follow the production layout: state
``[AIAN flag][FIPS]``, county + ``10`` + county FIPS, a 2-digit tract and a 1-digit block group segment, and the
block's ``geocode16`` last.  ``optimized_block_groups=True`` groups block 2001 with 1001 (a spine block group that
is no tabulation block group).  The noisy values are arbitrary integers from a seeded generator.

Run ``python tests/data/census_nmf/make.py`` to regenerate the committed copy.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

PRODUCT = "US_Person_PL_PROD"
HERE = Path(__file__).resolve().parent

# (AIAN flag, county, tract, block) of each block
BLOCKS = [("0", "007", "000100", "1001"), ("0", "007", "000100", "1002"), ("0", "007", "000100", "2001"),
          ("0", "009", "000200", "1001"), ("1", "009", "000300", "1003")]
TRACT_SEGMENT = {"000100": "01", "000200": "01", "000300": "01"}
SHAPES = {"total_dpq": [1, 1, 1, 1], "votingage * hispanic_dpq": [1, 2, 2, 1], "hhinstlevels_dpq": [3, 1, 1, 1],
          "detailed_dpq": [8, 2, 2, 63]}
LEVEL_QUERIES = {"US": ["total_dpq"],
                 "State": ["total_dpq", "votingage * hispanic_dpq", "hhinstlevels_dpq"],
                 "County": ["total_dpq", "votingage * hispanic_dpq", "hhinstlevels_dpq"],
                 "Tract": ["total_dpq", "votingage * hispanic_dpq"],
                 "Block_Group": ["total_dpq", "votingage * hispanic_dpq"],
                 "Block": ["total_dpq", "detailed_dpq"]}
VARIANCE = {"US": 1.5, "State": 2.25, "County": 4.0, "Tract": 9.0, "Block_Group": 16.0, "Block": 25.0}


def geocode16(block) -> str:
    _, county, tract, blk = block
    return "44" + county + tract + blk[0] + blk


def spine(block, level: str, optimized_block_groups: bool = False) -> str:
    """The block's ancestor's DAS geocode at ``level``."""
    aian, county, tract, blk = block
    state = aian + "44"
    if level == "US":
        return ""
    if level == "State":
        return state
    cty = state + "10" + county
    if level == "County":
        return cty
    trt = cty + TRACT_SEGMENT[tract]
    if level == "Tract":
        return trt
    bg = blk[0]
    if optimized_block_groups and (county, tract, blk) == ("007", "000100", "2001"):
        bg = "1"
    bgc = trt + bg
    if level == "Block_Group":
        return bgc
    return bgc + geocode16(block)


def _write(path: Path, rows: dict, constraint: bool) -> None:
    path.mkdir(parents=True, exist_ok=True)
    fields = [pa.field("geocode", pa.string()), pa.field("query_name", pa.string()),
              pa.field("value", pa.list_(pa.int64()))]
    if constraint:
        fields.append(pa.field("sign", pa.string()))
    else:
        fields.append(pa.field("variance", pa.float64()))
    fields.append(pa.field("query_shape", pa.list_(pa.int32())))
    table = pa.table({f.name: pa.array(rows[f.name], type=f.type) for f in fields})
    pq.write_table(table, path / "part-00000-c000.snappy.parquet")
    (path / "_SUCCESS").write_bytes(b"")


def write_release(root: Path, *, optimized_block_groups: bool = False, seed: int = 2020) -> Path:
    """Write the product folder under ``root`` and return its path."""
    rng = np.random.default_rng(seed)
    out = Path(root) / PRODUCT
    if out.exists():
        shutil.rmtree(out)
    for level, queries in LEVEL_QUERIES.items():
        codes = sorted({spine(b, level, optimized_block_groups) for b in BLOCKS})
        parts = {}
        for code in codes:
            part = None if level == "US" else code[:3]
            meas = parts.setdefault(part, ({k: [] for k in ("geocode", "query_name", "value", "variance",
                                                               "query_shape")},
                                           {k: [] for k in ("geocode", "query_name", "value", "sign",
                                                            "query_shape")}))
            for q in queries:
                size = int(np.prod(SHAPES[q]))
                meas[0]["geocode"].append(code)
                meas[0]["query_name"].append(q)
                meas[0]["value"].append(rng.integers(-3, 40, size).tolist())
                meas[0]["variance"].append(VARIANCE[level])
                meas[0]["query_shape"].append(SHAPES[q])
            con = meas[1]
            if level in ("US", "State"):
                con["geocode"].append(code)
                con["query_name"].append("total_con")
                con["value"].append([int(rng.integers(100, 200))])
                con["sign"].append("=")
                con["query_shape"].append([1, 1, 1, 1])
            if level in ("State", "Block"):
                # bounds that can hold together: upper = lower + 100 to 500, so every category's range is wide
                lower = rng.integers(0, 5, 8)
                upper = lower + 100 * (rng.integers(0, 5, 8) + 1)
                for name, sign, value in (("hhgq_total_lb_con", "ge", lower), ("hhgq_total_ub_con", "le", upper)):
                    con["geocode"].append(code)
                    con["query_name"].append(name)
                    con["value"].append(value.tolist())
                    con["sign"].append(sign)
                    con["query_shape"].append([8, 1, 1, 1])
        for part, (meas, con) in parts.items():
            base = out / f"{level}.parquet"
            sub = [] if part is None else [f"State={part}"]
            _write(base.joinpath("DPQuery", *sub), meas, constraint=False)
            if con["geocode"]:
                _write(base.joinpath("Constraint", *sub), con, constraint=True)
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    print(write_release(target))
