"""The PTX of argus.kernels.gemm: the specialization the benchmark runs lowers, ptxas assembles it
without spills or warnings, and the SASS holds the Hopper machinery it asked for (HGMMA with
N = 256, UTMALDG, register reallocation, one wgmma group kept in flight); the k-block loops
are free of 64-bit division."""

import re

import pytest

from argus.backend_ptx import emit_ptx
from argus.backend_ptx.assemble import build_cubin, disassemble
from argus.kernels.gemm import CANDIDATES, GemmConfig, gemm_kernel, tuned_config
from argus.spec.kernel import kernel_hash
from argus.toolchain import find_ptxas


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
def test_default_specialization_assembles_with_the_hopper_machinery():
    kernel = gemm_kernel().specialize(**GemmConfig().consts(), SMS=132)
    ptx = emit_ptx(kernel, "sm_90a")
    text = ptx.text
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in text and "setmaxnreg.inc.sync.aligned.u32 232;" in text
    assert "wgmma.wait_group.sync.aligned 1;" in text  # one group in flight across k-blocks
    assert "bar.sync 1, 256;" in text  # the consumers meet before one of them releases a stage
    assert ptx.dynamic_shared_bytes <= 227 * 1024
    cubin = build_cubin(ptx, kernel_hash(kernel))
    assert "0 bytes spill stores" in cubin.log and "warning" not in cubin.log.lower(), cubin.log
    assert not cubin.performance_issues, cubin.log
    try:
        sass = disassemble(cubin.image)
    except Exception as err:  # no disassembler: assembling is the test
        pytest.skip(f"no SASS disassembler: {err}")
    assert sass.count("HGMMA.64x256x16.F32.BF16") == 4  # BK / 16 per k-block, one loop
    assert "UTMALDG.2D" in sass and "USETMAXREG.DEALLOC" in sass and "USETMAXREG.TRY_ALLOC" in sass
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass
    assert "UTMASTG.2D" in sass  # the epilogue's TMA stores
    assert "cp.async.bulk.wait_group.read" in text and "fence.proxy.async.shared::cta;" in text


def test_loop_invariant_divisions_are_computed_before_the_loop():
    ptx = emit_ptx(gemm_kernel().specialize(BN=64, STAGES=3, SMS=4), "sm_90a").text
    # the k-block loops hold no 64-bit division: the tile coordinates (divisions by run-time
    # sizes) are computed per tile, the ring slot and phase (by 3) by a multiply-high
    for loop in _innermost_loops(ptx):
        assert "div.s64" not in loop and "rem.s64" not in loop and "div.u64" not in loop, loop[:400]
    assert "mul.hi.u64" in ptx
    # the fast 32-bit path of a run-time 64-bit division
    assert "div.u32" in ptx and "div.s64" in ptx


def test_tile_coordinates_are_computed_once_per_tile_not_per_store():
    ptx = emit_ptx(gemm_kernel().specialize(**GemmConfig(BN=256, GROUP_M=16).consts(), SMS=132), "sm_90a").text
    # tile_of's divisions (tile number by group size, by group height): once per tile for the
    # producer and once for the consumers, where they wait for their last wgmma group — not
    # again inside each of the four TMA stores' elected branches; the floor quotient and the
    # floor modulo of one pair of operands share one division
    assert ptx.count("div.u32") == 4, ptx.count("div.u32")
    assert ptx.count("div.u32") == ptx.count("rem.u32") == ptx.count("div.s64")
    epilogue = ptx[ptx.index("wgmma.wait_group.sync.aligned 0;"):]
    stores = epilogue.count("cp.async.bulk.tensor.2d.global.shared::cta")
    assert stores == 4 and "div" not in epilogue


def _innermost_loops(ptx: str) -> list[str]:
    """The text between each loop label and its backward branch that holds no other loop."""
    out = []
    for match in re.finditer(r"^(\$L_loop_\d+):$", ptx, re.M):
        label = match.group(1)
        end = ptx.find(f"bra.uni {label};", match.end())
        if end < 0:
            end = ptx.find(f"bra {label};", match.end())
        body = ptx[match.end():end]
        if "$L_loop_" not in body:
            out.append(body)
    return out


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
def test_cluster_specialization_multicasts_b_and_releases_remotely_at_cta_scope():
    kernel = gemm_kernel().specialize(**GemmConfig(CLUSTER=2).consts(), SMS=132)
    assert kernel.launch.cluster == (2, 1, 1)
    text = emit_ptx(kernel, "sm_90a").text
    assert ".reqnctapercluster 2, 1, 1" in text
    assert text.count(".multicast::cluster") == 1  # B's half box into both blocks; A stays local
    # each release arrives locally and on the peer's barrier; a cluster-scope release there cost
    # the kernel a factor of 1.66 on an H200 and orders nothing the refill needs
    assert text.count("mapa.shared::cluster.u32") == 2
    assert text.count("mbarrier.arrive.shared::cluster.b64") == 2 and "release.cluster.shared::cluster" not in text
    assert text.count("barrier.cluster.wait.aligned;") == 2  # after the mbarrier init and before exit
    cubin = build_cubin(emit_ptx(kernel, "sm_90a"), kernel_hash(kernel))
    assert "0 bytes spill stores" in cubin.log and "warning" not in cubin.log.lower(), cubin.log
    assert not cubin.performance_issues, cubin.log


# what the benchmark builds: every candidate the autotuner may pick and the epilogue variants
_BUILT = [((), c.consts()) for c in CANDIDATES] + [((), GemmConfig().consts())] + [
    (v, tuned_config(4096, 4096, 4096).consts()) for v in (("bf16", "f32"), ("f16", "f16"), ("bf16", "bf16", True, "relu"))]


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
@pytest.mark.parametrize("variant, consts", _BUILT, ids=[f"{'-'.join(map(str, v)) or 'bf16'}-{c['BN']}-{c['STAGES']}-"
                                                        f"{c.get('RELEASE', 'wg')}" for v, c in _BUILT])
def test_every_built_specialization_assembles_without_performance_loss(variant, consts):
    # no spill, and no wgmma serialized by the assembler (ptxas reports C7519 as an info line:
    # a wait after every wgmma, which would cost the main loop its overlap)
    kernel = gemm_kernel(*variant).specialize(**consts, SMS=132)
    cubin = build_cubin(emit_ptx(kernel, "sm_90a"), kernel_hash(kernel))
    assert cubin.performance_issues == [], cubin.log


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
def test_no_group_in_flight_waits_for_each_k_block_without_a_barrier():
    kernel = gemm_kernel().specialize(**GemmConfig(INFLIGHT=0, RELEASE="threads").consts(), SMS=132)
    text = emit_ptx(kernel, "sm_90a").text
    loop = text[text.index("wgmma.fence.sync.aligned;"):text.index("wgmma.wait_group.sync.aligned 0;")]
    assert "wgmma.wait_group.sync.aligned 1;" not in text  # no group carried across k-blocks
    assert "bar.sync" not in loop and "mbarrier.arrive.shared::cta.b64" in text[text.index("wgmma.fence"):]
    cubin = build_cubin(emit_ptx(kernel, "sm_90a"), kernel_hash(kernel))
    assert cubin.performance_issues == [], cubin.log


@pytest.mark.parametrize("majors", [("k", "k"), ("m", "n")])
def test_the_one_tile_row_pick_streams_b_through_l2_and_keeps_a(majors):
    # L2="stream": every load of A evict-last (all blocks read it), of B evict-first (read once);
    # the other picks give no priority
    cfg = tuned_config(128, 14336, 4096)
    assert cfg.L2 == "stream" and tuned_config(4096, 4096, 4096).L2 == "normal"
    ptx = emit_ptx(gemm_kernel(a_major=majors[0], b_major=majors[1]).specialize(**cfg.consts(), SMS=132), "sm_90a").text
    policy = {p: r for p, r in re.findall(r"createpolicy\.fractional\.L2::(evict_\w+)\.b64 (%rd\d+), 1\.0;", ptx)}
    tmap = {int(i): reg for reg, i in re.findall(r"mov\.b64 (%rd\d+), p_tmap(\d);", ptx)}  # a, b, c in order
    generic = {i: re.search(rf"cvta\.param\.u64 (%rd\d+), {reg};", ptx).group(1) for i, reg in tmap.items()}
    loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\S*\.L2::cache_hint \[%r\d+\], \[(%rd\d+), "
                       r"\{[^}]*\}\], \[%r\d+\], (%rd\d+);", ptx)
    per_map = {m: {h for mm, h in loads if mm == m} for m, _ in loads}
    assert len(loads) == (1 if majors[0] == "k" else 2) + (1 if majors[1] == "k" else cfg.BN // 64)
    assert per_map == {generic[0]: {policy["evict_last"]}, generic[1]: {policy["evict_first"]}}
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster") == len(loads)  # every operand load hinted
    plain = emit_ptx(gemm_kernel().specialize(**tuned_config(4096, 4096, 4096).consts(), SMS=132), "sm_90a").text
    assert "createpolicy" not in plain and "cache_hint" not in plain


def test_a_dependent_gemm_waits_before_its_first_global_access_and_triggers_after_its_last_load():
    assert tuned_config(4096, 4096, 4096).PDL  # every candidate is a dependent launch
    kernel = gemm_kernel().specialize(**tuned_config(4096, 4096, 4096).consts(), SMS=132)
    ptx = emit_ptx(kernel, "sm_90a")
    text = ptx.text
    assert ptx.dependent_launch and text.count("griddepcontrol.wait;") == 1
    wait = text.index("griddepcontrol.wait;")
    assert text.index("mbarrier.init") < wait < text.index("cp.async.bulk.tensor")  # setup first, loads after
    trigger = text.index("griddepcontrol.launch_dependents;")
    assert text.rindex("cp.async.bulk.tensor.2d.shared::cluster") < trigger < text.index("wgmma.fence")
    plain = emit_ptx(gemm_kernel().specialize(**{**tuned_config(4096, 4096, 4096).consts(), "PDL": False}, SMS=132),
                     "sm_90a")
    assert not plain.dependent_launch and "griddepcontrol" not in plain.text
