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


def _instructions(text: str) -> list[str]:
    """The instruction lines of a module (no comments, labels or declarations), sorted."""
    return sorted(line.strip() for line in text.splitlines()
                  if line.startswith("\t") and not line.strip().startswith(("//", ".")) and line.strip())


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
def test_schedules_move_the_k_loop_arithmetic_and_keep_every_instruction(tmp_path, gemm_benchmark):
    bench = gemm_benchmark
    bench.prepare(tmp_path, ["main_c0"], [])
    made = bench.ptx_variants(tmp_path, "main_c0", [], [], [], ["hoist", "pipe", "uniformwg", "epihoist", "ring+pipe"])
    assert made == ["main_c0_schedhoist", "main_c0_schedpipe", "main_c0_scheduniformwg", "main_c0_schedepihoist",
                    "main_c0_schedring_pipe"]
    base = (tmp_path / "main_c0.ptx").read_text()
    ptx = {key: (tmp_path / f"{key}.ptx").read_text() for key in made}

    def loop(text):
        return bench._k_loop(text).group(0)

    # hoist and epihoist only move lines: the same instructions, in another order
    for key in ("main_c0_schedhoist", "main_c0_schedepihoist"):
        assert _instructions(ptx[key]) == _instructions(base) and ptx[key] != base
    # hoist: every descriptor's arithmetic is above the stage wait, the wgmmas follow the fence directly
    hoisted = loop(ptx["main_c0_schedhoist"])
    waited = hoisted[hoisted.index("mbarrier.try_wait"):]
    assert "or.b64" not in waited and hoisted.count("or.b64") == loop(base).count("or.b64") == 8
    assert re.search(r"wgmma\.fence\.sync\.aligned;\n\twgmma\.mma_async", waited)
    # epihoist: the epilogue's divisions move from after the k-block loop to before it
    k_at = ptx["main_c0_schedepihoist"].index(loop(ptx["main_c0_schedepihoist"]))
    assert ptx["main_c0_schedepihoist"].count("div.u32") == base.count("div.u32")
    assert ptx["main_c0_schedepihoist"].rindex("div.u32", 0, k_at) > base.rindex("div.u32", 0, base.index(loop(base)))

    # pipe: the next k-block's stage and phase computed before this one's wgmma wait, carried over
    piped = loop(ptx["main_c0_schedpipe"])
    ahead = piped[piped.index("wgmma.commit_group"):piped.index("wgmma.wait_group")]
    assert re.search(r"add\.s64 %argus_k1, %rd\d+, 1;", ahead) and "%argus_n" in ahead
    assert not re.search(r"mul\.lo\.s64", piped[:piped.index("mbarrier.try_wait")])  # no index math at the top
    assert set(_instructions(base)) <= set(_instructions(ptx["main_c0_schedpipe"]))
    assert len(re.findall(r"mov\.b(?:32|64) %r\w*\d+, %argus_n", piped)) >= 3  # stage, barrier address, phase

    # uniformwg: the warpgroup index broadcast from lane 0, nothing else changed
    assert "shfl.sync.idx.b32 %argus_wg, %argus_wg, 0, 31, -1;" in ptx["main_c0_scheduniformwg"]

    # ring (with pipe): each warpgroup waits for its turn before the fence and passes it on after the commit
    ring = ptx["main_c0_schedring_pipe"]
    body = loop(ring)
    assert body.index("bar.sync 2, 256") < body.index("wgmma.fence") < body.index("wgmma.commit_group") \
        < body.index("bar.arrive 3, 256")
    assert ring.count("bar.arrive 2, 256") == 2 and ring.count("bar.sync 2, 256") == 2  # first turn, last one back
    assert ring.count("bar.sync 3, 256") == ring.count("bar.arrive 3, 256") == 1

    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for key in made:
        assert manifest[key]["ptx_patch"] and "0 bytes spill stores" in " ".join(manifest[key]["ptxas"])


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
def test_entry_exit_and_diagnostic_schedules(tmp_path, gemm_benchmark):
    bench = gemm_benchmark
    bench.prepare(tmp_path, ["main_c0"], [])
    with pytest.raises(SystemExit, match="give one of hoist"):
        bench.ptx_variants(tmp_path, "main_c0", [], [], [], ["hoist+unroll"])
    assert not list(tmp_path.glob("main_c0_sched*"))
    with pytest.raises(SystemExit, match="give one of"):
        bench.ptx_variants(tmp_path, "main_c0", [], [], [], ["sync0"])
    made = bench.ptx_variants(tmp_path, "main_c0", [], [], [], ["tmapfetch+exitread", "hint", "nostore", "noepi",
                                                                "sync16", "sync12"])
    base = (tmp_path / "main_c0.ptx").read_text()
    ptx = {key: (tmp_path / f"{key}.ptx").read_text() for key in made}

    both = ptx["main_c0_schedtmapfetch_exitread"]
    fetched = re.findall(r"prefetch\.tensormap \[(%rd\d+)\];", both)
    assert fetched == re.findall(r"cvta\.param\.u64 (%rd\d+), %rd\d+;", base) and len(fetched) == 3
    assert both.index("prefetch.tensormap") < both.index("mbarrier.init") < both.index("bar.sync 0")
    assert both.count("cp.async.bulk.wait_group.read 0;") == base.count("cp.async.bulk.wait_group.read 0;") + 1
    assert "cp.async.bulk.wait_group 0;" not in both and "cp.async.bulk.wait_group 0;" in base

    waits = re.findall(r"mbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[([^\]]+)\], %r\d+(, 10000000)?;",
                       ptx["main_c0_schedhint"])
    stage_wait = bench._k_loop(base).group("try")
    assert [hint for _, hint in waits].count(", 10000000") == 1 and len(waits) == base.count("mbarrier.try_wait")
    assert next(where for where, hint in waits if hint) in stage_wait  # the consumers' wait for a full stage

    assert "cp.async.bulk.tensor.2d.global.shared" in base
    assert "cp.async.bulk.tensor.2d.global.shared" not in ptx["main_c0_schednostore"]
    skipped = ptx["main_c0_schednoepi"]
    assert skipped.count("add.f32 %argus_sum") == 127 and "bra.uni $L_argus_next_tile;" in skipped
    assert skipped.index("bra.uni $L_argus_next_tile;") < skipped.index("$L_argus_next_tile:")
    for key, every in (("main_c0_schedsync16", r"and\.b64 %argus_kmod, (%rd\d+), 15;"),
                       ("main_c0_schedsync12", r"rem\.u64 %argus_kmod, (%rd\d+), 12;")):
        head = bench._k_loop(ptx[key]).group("index")
        counter = re.search(every, head).group(1)
        assert counter == bench._k_loop(base).group("k")  # the tile's k-block counter
        assert re.search(r"setp\.eq\.s64 %argus_meet, %argus_kmod, 0;\n\t@%argus_meet bar\.sync 2, 256;", head)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["main_c0_schednoepi"]["ptx_patch"].startswith("diagnostic")
    assert manifest["main_c0_schednostore"]["ptx_patch"].startswith("diagnostic")


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
def test_prepare_builds_only_the_extra_keys_over_the_4096_pick(tmp_path, gemm_benchmark):
    from argus.kernels.gemm import tuned_config

    bench = gemm_benchmark
    bench.prepare(tmp_path, [], [], ['g8_sms128={"GROUP_M": 8, "SMS": 128}', "plain_f16:f16="])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert sorted(manifest) == ["g8_sms128", "plain_f16"]
    pick = tuned_config(4096, 4096, 4096).consts()
    assert manifest["g8_sms128"]["consts"] == {**pick, "GROUP_M": 8, "SMS": 128} and manifest["g8_sms128"]["sms"] == 128
    assert manifest["plain_f16"]["variant"] == "f16" and manifest["plain_f16"]["consts"] == pick
    assert "SMS" in manifest["g8_sms128"]["consts"] and manifest["plain_f16"]["sms"] == 132


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not installed (pip install 'argus-kernels[nvidia]')")
def test_probe_schedules_stamp_and_restructure_the_loops(tmp_path, gemm_benchmark):
    bench = gemm_benchmark
    bench.prepare(tmp_path, ["main_c0"], [])
    made = bench.ptx_variants(tmp_path, "main_c0", [], [], [], ["stamps", "estamps", "noload", "nomma", "pair",
                                                                "n128x2", "defer", "stamps+pair"])
    base = (tmp_path / "main_c0.ptx").read_text()
    ptx = {key.removeprefix("main_c0_sched"): (tmp_path / f"{key}.ptx").read_text() for key in made}
    loop = bench._k_loop(base)

    # stamps: eight clock stamps per k-block, the observer waits on the stage's full barrier
    stamped = ptx["stamps"]
    assert ".global .align 8 .b64 argus_stamps[" in stamped
    assert stamped.count("mov.u64 %argus_t, %clock64;") == 5  # producer wake, observer, 3 in the consumer loop
    full = re.search(r"mbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[%r\d+\+(\d+)\]", loop.group("try")).group(1)
    assert f"mbarrier.try_wait.parity.shared::cta.b64 %argus_ok, [%argus_s+{full}], %argus_ph;" in stamped
    assert "setp.eq.s32 %argus_obs, %r1, 32;" in stamped
    assert _instructions(base) == sorted(x for x in _instructions(stamped) if "%argus" not in x)
    # estamps: the drain, each of the epilogue's twelve steps and its end
    assert ptx["estamps"].count("mov.u64 %argus_et, %clock64;") == 14

    # noload: the producer's transaction and both loads only for the block's first STAGES k-blocks
    stages = json.loads((tmp_path / "manifest.json").read_text())["main_c0"]["consts"]["STAGES"]
    assert re.search(rf"setp\.lt\.s64 %argus_fill, %rd\d+, {stages};\n\t@%argus_fill mbarrier\.arrive\.expect_tx",
                     ptx["noload"])
    assert ptx["noload"].count("@%argus_fill cp.async.bulk.tensor.2d.shared::cluster.global") == 2
    assert "@!%argus_fill mbarrier.arrive.shared::cta.b64" in ptx["noload"]
    # nomma: the loop keeps its waits, fence, commit and release, but no wgmma
    emptied = bench._k_loop(ptx["nomma"])
    assert "wgmma.mma_async" not in emptied.group(0) and "wgmma.commit_group" in emptied.group(0)
    assert base.count("wgmma.mma_async") == loop.group("mma").count("wgmma.mma_async") == 4

    # pair: one loop that waits twice, issues 8 wgmmas before waiting for them, releases twice, steps by 2
    head = loop.group("head")
    body = ptx["pair"][ptx["pair"].index(f"{head}:"):ptx["pair"].index(f"bra.uni {head};")]
    assert body.count("mbarrier.try_wait") == 2 and body.count("wgmma.mma_async") == 8
    assert body.index("$L_argus_wait_") < body.rindex("wgmma.mma_async") < body.index("wgmma.wait_group.sync.aligned 0")
    assert body.count("mbarrier.arrive.shared::cta.b64") == 2 and body.count("wgmma.fence") == 1
    assert re.search(rf"add\.s64 {re.escape(loop.group('k'))}, {re.escape(loop.group('k'))}, 2;", body)
    assert "@!%argus_two bra.uni" in body  # an odd k-block count ends with a single k-block
    assert "%argus_k1" in ptx["stamps_pair"] and ptx["stamps_pair"].count("%argus_wg4, 8;") == 2

    # n128x2: each m64n256k16 as two m64n128k16 on the accumulator's halves, B's upper half 16 KB on
    split = bench._k_loop(ptx["n128x2"]).group("mma")
    wgmmas = re.findall(r"m64n128k16\.f32\.bf16\.bf16 \{([^}]*)\}, (%rd\d+), (%\w+),", split)
    assert len(wgmmas) == 8 and "m64n256k16" not in split
    original = re.findall(r"m64n256k16\.f32\.bf16\.bf16 \{([^}]*)\}, (%rd\d+), (%rd\d+),", loop.group("mma"))
    for (acc, a, b), (lo, lo_a, lo_b), (hi, hi_a, hi_b) in zip(original, wgmmas[0::2], wgmmas[1::2]):
        regs = acc.replace(" ", "").split(",")
        assert lo.replace(" ", "").split(",") == regs[:64] and hi.replace(" ", "").split(",") == regs[64:]
        assert lo_a == hi_a == a and lo_b == b and f"add.s64 {hi_b}, {b}, 1024;" in split

    # defer: the last two boxes' stores leave the epilogue for the next tile's first k-block (between
    # its commit and its wait) and for the end of the tile loop; the wait for the first box's reads goes with them
    deferred = bench._k_loop(ptx["defer"])
    inside = deferred.group("mma")[deferred.group("mma").index("wgmma.commit_group"):] + deferred.group("retire")
    stores = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
    assert base.count(stores) == 4 and ptx["defer"].count(stores) == 2 + 2 + 2
    flush = ptx["defer"][ptx["defer"].index("@!%argus_pending bra.uni $L_argus_flushed_a;"):]
    assert flush.index(stores) < flush.index("$L_argus_flushed_a:") < flush.index("wgmma.wait_group.sync.aligned 0")
    assert "@!%argus_pending bra.uni $L_argus_flushed_a;" in ptx["defer"][deferred.start():deferred.end()]
    assert re.search(r"\t@%p\d+ cp\.async\.bulk\.wait_group\.read 1;\n\tbar\.sync 1, 256;", flush)
    # the epilogue keeps box 0's wait; box 1's (which frees box 2's buffer) and box 2's go to both flushes
    assert ptx["defer"].count("cp.async.bulk.wait_group.read 1;") == base.count("cp.async.bulk.wait_group.read 1;") - 2 + 2 * 2
    after = ptx["defer"][ptx["defer"].index("$L_argus_flushed_a:"):]
    assert after.index("setp.eq.s32 %argus_pending, 1, 1;") < after.index("@!%argus_pending bra.uni $L_argus_flushed_b;")
    # the flush sits where the tensor cores still run the k-block's wgmmas: after its commit, before its wait
    assert "@!%argus_pending bra.uni $L_argus_flushed_a;" in inside and inside.count(stores) == 2
    assert inside.index("$L_argus_flushed_a:") < inside.index("wgmma.wait_group.sync.aligned 0")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for key in made:
        assert manifest[key]["ptx_patch"] and "0 bytes spill stores" in " ".join(manifest[key]["ptxas"])
    assert manifest["main_c0_schedstamps"]["ptx_patch"].startswith("diagnostic")


def test_timeline_summary_reads_refill_slack_and_stalls_from_the_stamps(gemm_benchmark):
    np = pytest.importorskip("numpy")
    bench = gemm_benchmark
    stamps = np.zeros((3, bench.STAMP_CAP, 8), dtype=np.int64)
    period, stages = 1100, 4
    for it in range(200):
        t = 50_000 + it * period
        # both warpgroups start waiting at t and t + 550; the stage arrived 40 cycles before the first
        # in even k-blocks, 60 cycles after it in odd ones (the first warpgroup then waits 60 + 15)
        arrived = t - 40 if it % 2 == 0 else t + 60
        got0 = max(t, arrived) + 15
        stamps[:, it] = [arrived - 1300, arrived, t, t + 550, got0, t + 565, t + 600, t + 1150]
    out = bench._timeline_summary(stamps, stages)
    assert out["k_blocks"] == 3 * (200 - 8)
    assert out["load"]["p50"] == 1300
    # the producer wakes (arrived - 1300) after the later warpgroup released the stage STAGES k-blocks earlier
    wake = stamps[0, 8 + stages:200, 0] - stamps[0, 8:200 - stages, 7]
    assert out["wake"]["mean"] == pytest.approx(float(wake.mean()), abs=0.1)
    assert out["late_fraction"] == pytest.approx(0.5, abs=0.01)
    assert out["slack"]["p10"] == -60 and out["slack"]["p90"] == 40
    assert out["period"]["p50"] == period
    assert out["stall_per_k_block"] == pytest.approx((15 + 75) / 2 + 15, abs=0.1)
