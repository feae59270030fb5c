"""ldmatrix / stmatrix in the PTX backend: the row address each lane supplies and the packing of
fragment values into the instruction's registers, replayed through the PTX ISA's description of
the instruction, give exactly the element placement the reference interpreter defines; the
mma.sync GEMM that loads its fragments with ldmatrix assembles with LDSM in its SASS."""

import sys
from pathlib import Path

import numpy as np
import pytest

import argus.spec as A
from argus.backend_ptx import emit_ptx
from argus.backend_ptx.assemble import build_cubin, disassemble
from argus.ir import lowering as L
from argus.ir.interp_mma import _matrix_table
from argus.toolchain import find_ptxas

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))


def _kernel(rows: int, columns: int, trans: bool, store: bool):
    @A.kernel(threads=32, grid=lambda: (1,))
    def matrix_copy(x: A.Global(A.bf16, "R C")):
        tile = A.shared(A.bf16, (rows, columns))
        if store:
            A.stmatrix(A.full((2, rows * columns // 64), 1.0, A.bf16), tile, trans=trans)
        else:
            A.ldmatrix(tile, trans=trans)

    return matrix_copy.specialize()


def _hardware(addresses: list[int], count: int, trans: bool) -> np.ndarray:
    """``element[lane, v]`` per the PTX ISA: lanes 8j..8j+7 address the rows of matrix j; without
    .trans lane t receives row t/4, columns 2(t%4), 2(t%4)+1 of matrix j in register j, with .trans
    rows 2(t%4), 2(t%4)+1 of column t/4; register j holds values 2j (low) and 2j+1."""
    out = np.empty((32, 2 * count), np.int64)
    for t in range(32):
        for j in range(count):
            for e in range(2):
                if trans:
                    out[t, 2 * j + e] = addresses[8 * j + 2 * (t % 4) + e] + t // 4
                else:
                    out[t, 2 * j + e] = addresses[8 * j + t // 4] + 2 * (t % 4) + e
    return out


@pytest.mark.parametrize("store", [False, True])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("rows, columns", [(8, 8), (16, 8), (8, 16), (16, 16)])
def test_lane_addresses_and_register_packing_match_the_interpreter(rows, columns, trans, store):
    kernel = _kernel(rows, columns, trans, store)
    lowered = L.lower_kernel(kernel, "sm_90a")
    (stmt,) = [s for s in lowered.walk() if isinstance(s, L.MatrixCopyStmt)]
    count = rows * columns // 64
    assert stmt.load is not store and len(stmt.regs) == 2 * count
    tid = kernel.thread_id
    addresses = [int(lowered.facts.simplify(stmt.address).subs(tid, lane)) for lane in range(32)]
    # the fragment's values are its registers in order (shape (2, count), column-major)
    assert [r.index for r in stmt.regs] == list(range(2 * count))
    np.testing.assert_array_equal(_hardware(addresses, count, trans), _matrix_table(stmt.atom, rows, columns))
    text = emit_ptx(lowered, "sm_90a").text
    op = "stmatrix" if store else "ldmatrix"
    assert f"{op}.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16" in text


def test_stmatrix_needs_sm_90a():
    from argus.backend_ptx import PtxError

    with pytest.raises(PtxError, match="sm_90a"):
        emit_ptx(_kernel(16, 16, False, True), "sm_80")


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_ldmatrix_gemm_assembles_with_ldsm(target, tmp_path, monkeypatch):
    import gemm_mma_sync

    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path))
    ptx = emit_ptx(gemm_mma_sync.gemm.specialize(LDMATRIX=True), target)
    cubin = build_cubin(ptx, "ldmatrix-gemm", cache=False)
    assert "0 bytes spill stores" in cubin.log or "spill" not in cubin.log
    try:
        sass = disassemble(cubin.image)
    except Exception as err:  # no disassembler: assembling is the test
        pytest.skip(f"no SASS disassembler: {err}")
    assert "LDSM.16.M88" in sass and "HMMA.16816.F32.BF16" in sass
