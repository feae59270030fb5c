"""``benchmarks/gemm.py ptx-variants``: experiments below the DSL on a prepared GEMM module (an L2
prefetch some k-blocks ahead of each operand load, L2 eviction policies on the loads).  They must
touch exactly the two operand loads, prefetch the right box, and stay marked as patched, so that
``sweep`` never passes them off as the gated kernel."""

import json
import re

import pytest

from argus.toolchain import find_ptxas


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
def test_prefetch_and_policy_variants_patch_the_two_operand_loads(tmp_path, gemm_benchmark):
    bench = gemm_benchmark
    bench.prepare(tmp_path, ["main_c0"], [])
    made = bench.ptx_variants(tmp_path, "main_c0", [8], ["evict_last_evict_first"])
    assert made == ["main_c0_l2pf8", "main_c0_l2_evict_last_evict_first"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    base = (tmp_path / "main_c0.ptx").read_text()
    loads = bench._TMA_LOAD.findall(base)
    assert [tmap for _, _, _, tmap, *_ in loads] == ["%rd8", "%rd10"]  # A, then B

    prefetched = (tmp_path / "main_c0_l2pf8.ptx").read_text()
    bk = manifest["main_c0"]["consts"]["BK"]
    for i, (_, _, _, tmap, k, row, _) in enumerate(loads):
        step = re.escape(f"add.s32 %argus_pk{i}, {k}, {8 * bk};")
        fetch = re.escape(f"cp.async.bulk.prefetch.tensor.2d.L2.global.tile [{tmap}, {{%argus_pk{i}, {row}}}];")
        assert re.search(step + r"\s+" + fetch, prefetched)
    assert prefetched.count("cp.async.bulk.prefetch.tensor") == 2
    assert len(bench._TMA_LOAD.findall(prefetched)) == 2  # the loads themselves unchanged

    hinted = (tmp_path / "main_c0_l2_evict_last_evict_first.ptx").read_text()
    assert "createpolicy.fractional.L2::evict_last.b64 %argus_pol0, 1.0;" in hinted
    assert "createpolicy.fractional.L2::evict_first.b64 %argus_pol1, 1.0;" in hinted
    assert hinted.count(".L2::cache_hint") == 2
    assert re.search(r"cache_hint \[%r\d+\], \[%rd8, .*\], %argus_pol0;", hinted)
    assert re.search(r"cache_hint \[%r\d+\], \[%rd10, .*\], %argus_pol1;", hinted)
    assert hinted.index("createpolicy") < hinted.index("cache_hint")

    for key in made:
        entry = manifest[key]
        assert entry["ptx_patch"] and entry["kernel_hash"] == manifest["main_c0"]["kernel_hash"]
        assert (tmp_path / f"{key}.cubin").stat().st_size > 0
        assert "0 bytes spill stores" in " ".join(entry["ptxas"])


def test_variants_refuse_operands_whose_first_coordinate_is_not_k(tmp_path, gemm_benchmark):
    bench = gemm_benchmark
    (tmp_path / "manifest.json").write_text(json.dumps({"b_n_tuned": {"variant": "b_n", "consts": {}}}))
    with pytest.raises(SystemExit, match="K-major"):
        bench.ptx_variants(tmp_path, "b_n_tuned", [8], [])


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
def test_an_unknown_policy_pair_is_refused_before_anything_is_built(tmp_path, gemm_benchmark):
    bench = gemm_benchmark
    bench.prepare(tmp_path, ["main_c0"], [])
    with pytest.raises(SystemExit, match="evict_last, evict_normal"):
        bench.ptx_variants(tmp_path, "main_c0", [4], ["evict_last_keep"])
    assert not list(tmp_path.glob("main_c0_l2*"))


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
def test_release_variants_shrink_the_empty_barriers_and_predicate_the_release(tmp_path, gemm_benchmark):
    bench = gemm_benchmark
    bench.prepare(tmp_path, ["main_c0", "main_c1_cluster2"], [])
    assert bench.ptx_variants(tmp_path, "main_c0", [], [], ["warp", "warpgroup"]) == [
        "main_c0_relwarp", "main_c0_relwarpgroup"]
    base = (tmp_path / "main_c0.ptx").read_text()
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[[^\]]+\], 256;", base)) == 4  # STAGES empty barriers
    for key, count, mask in (("main_c0_relwarp", 8, 31), ("main_c0_relwarpgroup", 2, 127)):
        text = (tmp_path / f"{key}.ptx").read_text()
        assert len(re.findall(rf"mbarrier\.init\.shared::cta\.b64 \[[^\]]+\], {count};", text)) == 4
        assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[[^\]]+\], 1;", text)) == 4  # full barriers kept
        assert f"and.b32 %argus_lane, %argus_lane, {mask};" in text
        assert "setp.eq.u32 %argus_rel0, %argus_lane, 0;" in text
        assert re.search(r"@%argus_rel0 mbarrier\.arrive\.shared::cta\.b64 _, \[%r\d+\+\d+\];", text)
        assert text.count("mbarrier.arrive.shared::cta.b64") == 1  # the producer's expect-tx arrival untouched
        assert text.count("mbarrier.arrive.expect_tx") == base.count("mbarrier.arrive.expect_tx")

    bench.ptx_variants(tmp_path, "main_c0", [], [], ["elect"])
    elected = (tmp_path / "main_c0_relelect.ptx").read_text()
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[[^\]]+\], 8;", elected)) == 4
    assert re.search(r"elect\.sync _\|%argus_rel0, -1;\s+@%argus_rel0 mbarrier\.arrive\.shared::cta", elected)

    bench.ptx_variants(tmp_path, "main_c1_cluster2", [], [], ["warp", "spread"])
    spread = (tmp_path / "main_c1_cluster2_relspread.ptx").read_text()
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[[^\]]+\], 4;", spread)) == 4  # 2 warpgroups x 2 blocks
    assert "setp.eq.u32 %argus_rel1, %argus_lane, 32;" in spread  # the remote arrival from the second warp
    assert re.search(r"@%argus_rel1 mbarrier\.arrive\.shared::cluster\.b64 _, \[%r\d+\];", spread)
    warp = (tmp_path / "main_c1_cluster2_relwarp.ptx").read_text()
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[[^\]]+\], 16;", warp)) == 4  # 8 warps x 2 blocks
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert all(manifest[k]["ptx_patch"].startswith("one empty-barrier arrival") for k in
               ("main_c0_relwarp", "main_c1_cluster2_relspread"))

    with pytest.raises(SystemExit, match="spread on a 2-block cluster"):
        bench.ptx_variants(tmp_path, "main_c0", [], [], ["spread"])


def test_release_variants_need_a_per_thread_release(tmp_path, gemm_benchmark):
    bench = gemm_benchmark
    (tmp_path / "manifest.json").write_text(json.dumps({"main_e0": {"variant": "main", "consts": {"BN": 256}}}))
    with pytest.raises(SystemExit, match="RELEASE='threads'"):
        bench.ptx_variants(tmp_path, "main_e0", [], [], ["warp"])


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
def test_a_key_with_its_own_persistent_grid_keeps_it(tmp_path, gemm_benchmark):
    bench = gemm_benchmark
    keys = {key: consts for key, _, consts in bench._specializations()}
    assert keys["main_c1_sms128"]["SMS"] == 128 and "SMS" not in keys["main_c1"]
    bench.prepare(tmp_path, ["main_c1", "main_c1_sms128", "main_c1_sms128_sms120", "main_c1_sms120"], [120, 128])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert "main_c1_sms128_sms120" not in manifest  # --grids leaves a fixed grid alone
    # a --grids key carries its grid in its consts (so main_c1_sms128 from --grids 128 is the same
    # specialization as the fixed-grid key, whatever path specializes it)
    assert manifest["main_c1_sms120"]["consts"]["SMS"] == manifest["main_c1_sms120"]["sms"] == 120
    assert manifest["main_c1_sms128"]["consts"]["SMS"] == 128
    assert (manifest["main_c1"]["sms"], manifest["main_c1_sms128"]["sms"]) == (132, 128)
    assert manifest["main_c1"]["kernel_hash"] != manifest["main_c1_sms128"]["kernel_hash"]
    # the sweep and the gated run specialize it at its own grid, whatever the device's SM count
    assert bench._with_grid(manifest["main_c1_sms128"]["consts"], 132)["SMS"] == 128
    assert bench._with_grid(manifest["main_c1"]["consts"], 114)["SMS"] == 114
