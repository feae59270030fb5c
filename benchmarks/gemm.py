"""argus's Hopper GEMM (``argus.kernels.gemm``) against ``torch.matmul`` (cuBLAS) on one GPU.

Two steps, so that the GPU machine needs neither solvers nor an assembler nor minutes of
lowering:

    python benchmarks/gemm.py prepare build/gemm            # here: PTX + cubins of every candidate
    python benchmarks/gemm.py run build/gemm --out OUT       # on the GPU machine

``prepare`` specializes every candidate of the autotuner (``argus.kernels.gemm.CANDIDATES``)
and the epilogue variants, emits sm_90a PTX, assembles it with ptxas and saves the module, the
cubin and a manifest (PTX hash, ptxas report, what the gate says here).

``run`` goes through the gate for each specialization: one with a proof record is built by
``argus.compile`` (the gated user path); one without is reported as refused by the gate and
run through the backend's internal API with the cubin prepared here — a measurement of the
backend, not a user path.  Then, in one process:

1. correctness of every variant on fresh random normal inputs (outputs poisoned with NaN) at
   odd shapes and at every benchmarked shape, against a float64 reference, with torch's own
   error on the same inputs beside it;
2. the autotuner: every candidate timed at every shape (short runs), best recorded per shape;
   ``main_c1_sms128`` (the 4096³ pick on 128 persistent blocks) and ``main_c3_sms128`` (the
   same with the deferred epilogue) compete once the gate passes them (a proof record at that
   grid), never as refused kernels;
3. the benchmark: the best candidate and ``torch.matmul(a, b.T)`` interleaved by
   :func:`argus.runtime.timing.benchmark` (warm-up, L2 flushed before every timed call,
   rotating inputs, median of >= 50 runs), TFLOP/s and the ratio;
4. the operand layouts (variants ``b_n``, ``a_m``, ``a_m_b_n``: B stored K x N, A stored K x M)
   against ``torch.matmul`` on the same stored operands (``torch.matmul(a, b)`` for ``b_n``);
5. the fp16, bias + ReLU and fp32-C variants against torch's matmul with the same epilogue and
   output type, each at the faster of its 4096³ pick on 132 and on 128 persistent blocks;
6. dependent launches: at 4096³, 2048³ and 128 x 14336 x 4096, the pick (a dependent launch,
   ``PDL=True``, as every candidate) against its ``PDL=False`` twin (``<key>_serial``, fully
   serialized behind the previous kernel) and torch, behind the L2 flush as in step 3, back to
   back (``chain``: 20 calls timed as one) and as a replayed CUDA graph of the 20 calls.

Results go to ``OUT/gemm.json`` (written after every step) and a table on stdout.

Experiments: ``sweep DIR --keys ... --shapes ...`` times prepared keys against cuBLAS (a key
spelled ``KEY@l2pN`` launches with tensor maps of N-byte L2 promotion); ``prepare DIR --extra
KEY=JSON`` builds ad-hoc specializations (consts over the 4096³ pick's) for it; ``ptx-variants
DIR main_c1`` adds PTX-level variants of a prepared key (an L2 prefetch some k-blocks ahead of
each operand load, L2 eviction policies on the loads, one release arrival per warp or
warpgroup, and ``--schedules``: the consumer's k-block loop or the epilogue rescheduled, or
diagnostics), marked as patched and timed through the backend API, never as the gated kernel.
``timeline DIR --keys KEY_schedstamps ...`` launches the clock-stamp diagnostics (``--schedules
stamps`` / ``estamps``) and reports where a k-block's and an epilogue's cycles go: the refill of a
stage, how early it is full, each consumer warpgroup's wait and period, the tile transition.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import os
import pickle
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

H200_SMS = 132
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (16384, 4096, 4096), (2048, 2048, 2048),
          (128, 14336, 4096)]
"""(M, N, K) of the benchmark: C[M, N] = A[M, K] · B[N, K]ᵀ."""
ODD_SHAPES = [(200, 136, 72), (1000, 520, 264), (77, 1000, 1032), (1537, 2056, 1000), (128, 8, 8), (3000, 264, 4104)]
"""Shapes that are not multiples of the tile in M, N or K (N and K multiples of 8: TMA's 16-byte pitch)."""

# variant name -> (input dtype, output dtype, bias, activation); "main" is autotuned and timed
VARIANTS = {
    "main": ("bf16", "bf16", False, None),
    "f32_out": ("bf16", "f32", False, None),
    "f16": ("f16", "f16", False, None),
    "bias_relu": ("bf16", "bf16", True, "relu"),
    # operand layouts (a_major, b_major): B stored K x N (torch.matmul(a, b)), A stored K x M
    "b_n": ("bf16", "bf16", False, None, "k", "n"),
    "a_m": ("bf16", "bf16", False, None, "m", "k"),
    "a_m_b_n": ("bf16", "bf16", False, None, "m", "n"),
}
TIMED_VARIANTS = ("f16", "bias_relu", "f32_out")
"""The other types and epilogues that ``run`` times against their torch equivalent (step 5)."""
VARIANT_SHAPES = SHAPES[:4]
TOLERANCE = {"f32": 2e-5, "bf16": 8e-3, "f16": 2e-3}
"""Relative Frobenius error vs float64 allowed per output type: fp32 accumulation (K up to
16k) and one final rounding to the output type."""


def _default_key() -> str:
    """The main variant's key of the autotuner's pick at 4096³ (checked at every benchmarked shape)."""
    from argus.kernels.gemm import CANDIDATES, tuned_config

    return f"main_c{CANDIDATES.index(tuned_config(4096, 4096, 4096))}"


def _specializations() -> list[tuple[str, str, dict]]:
    """(key, variant, consts) of everything ``prepare`` builds: every candidate of the main
    variant, a few schedule variants, and the other variants with each pick of the autotuner
    (``<variant>_tuned``: at 4096³; ``<variant>_skinny``: for one tile row, M <= 128)."""
    from argus.kernels.gemm import BM, CANDIDATES, EARLIER, tuned_config

    out = []
    for i, cfg in enumerate(CANDIDATES):
        out.append((f"main_c{i}", "main", cfg.consts()))
    out.append(("main_e0", "main", EARLIER[0].consts()))  # one wgmma group in flight (not autotuned)
    out.append(("main_c1_cluster2", "main", {**CANDIDATES[1].consts(), "CLUSTER": 2}))  # B multicast to 2 blocks
    # 128 persistent blocks: the same waves as 132 at every benchmarked shape (their tile counts are
    # multiples of 128), each block the same number of tiles, each wave whole GROUP_M groups' columns
    out.append(("main_c1_sms128", "main", {**CANDIDATES[1].consts(), "SMS": 128}))
    out.append(("main_c3_sms128", "main", {**CANDIDATES[3].consts(), "SMS": 128}))  # the same, C's last boxes deferred
    # every candidate is a dependent launch (PDL=True: its setup overlaps the previous kernel); its
    # twin without (PDL=False, fully serialized) is what step 6 of `run` times it against
    for key, _, consts in [row for row in out if re.fullmatch(r"main_c\d+(_sms128)?", row[0])]:
        out.append((f"{key}_serial", "main", {**consts, "PDL": False}))
    # the same grid for the 4096³ pick of the other types and epilogues (step 5 of `run` tunes the two)
    for variant in TIMED_VARIANTS:
        out.append((f"{variant}_tuned_sms128", variant, {**tuned_config(4096, 4096, 4096).consts(), "SMS": 128}))
    # an fp32 C stored from registers, against the TMA epilogue that "auto" takes (not autotuned)
    out.append(("f32_out_direct", "f32_out", {**tuned_config(4096, 4096, 4096).consts(), "EPILOGUE": "direct"}))
    for variant in VARIANTS:
        if variant != "main":
            out.append((f"{variant}_tuned", variant, tuned_config(4096, 4096, 4096).consts()))
            out.append((f"{variant}_skinny", variant, tuned_config(BM, 14336, 4096).consts()))  # the M <= 128 pick
    return out


def _with_grid(consts: dict, sms: int) -> dict:
    """The ``const`` arguments of a specialization: ``consts`` and the persistent grid ``SMS``
    (the device's SM count unless the key fixes its own)."""
    return {"SMS": sms, **consts}


def _kernel(variant: str):
    from argus.kernels.gemm import gemm_kernel

    return gemm_kernel(*VARIANTS[variant])


# --------------------------------------------------------------------------- prepare (no GPU)


def prepare(directory: Path, only: list[str], grids: list[int], extra: list[str] = ()) -> None:
    from argus.backend_ptx.assemble import build_cubin
    from argus.backend_ptx.emit import emit_ptx
    from argus.kernels.gemm import tuned_config
    from argus.runtime.gate import VerificationRequired, require_proof
    from argus.spec.kernel import kernel_hash

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {}
    jobs = [(key, variant, consts, H200_SMS) for key, variant, consts in _specializations()]
    # other persistent grid sizes, for `sweep`: the key's consts carry its grid, as a fixed-grid key's do
    jobs += [(f"{key}_sms{sms}", variant, {**consts, "SMS": sms}, sms) for key, variant, consts in _specializations()
             for sms in grids if sms != H200_SMS and "SMS" not in consts]
    for spelled in extra:  # KEY[:VARIANT]={json consts over the 4096³ pick's}
        head, _, spec = spelled.partition("=")
        key, _, variant = head.partition(":")
        jobs.append((key, variant or "main", {**tuned_config(4096, 4096, 4096).consts(), **json.loads(spec or "{}")},
                     H200_SMS))
        only = [*only, key]  # with extras, only they and the keys named are built
    for key, variant, consts, sms in jobs:
        if only and key not in only:
            continue
        start = time.time()
        sms = consts.get("SMS", sms)  # a key with its own persistent grid
        specialized = _kernel(variant).specialize(**_with_grid(consts, sms))
        try:
            require_proof(specialized, verify=False)
            gate = "proved (record found)"
        except VerificationRequired as refusal:
            gate = f"refused: {str(refusal).splitlines()[0]}"
        ptx = emit_ptx(specialized, "sm_90a", root=str(ROOT))
        cubin = build_cubin(ptx, kernel_hash(specialized))
        (directory / f"{key}.cubin").write_bytes(cubin.image)
        (directory / f"{key}.ptx").write_text(ptx.text)
        (directory / f"{key}.pickle").write_bytes(pickle.dumps(ptx))
        report = [line.strip() for line in cubin.log.splitlines() if "registers" in line or "spill" in line]
        report += [issue for issue in cubin.performance_issues if "Performance Loss" in issue]  # e.g. wgmma serialized
        manifest[key] = {"variant": variant, "consts": consts, "sms": sms, "kernel_hash": kernel_hash(specialized),
                         "ptx_sha256": hashlib.sha256(ptx.text.encode()).hexdigest(), "tool": cubin.tool,
                         "gate_here": gate, "ptxas": report, "shared_bytes": ptx.dynamic_shared_bytes}
        print(f"{key:14s} {consts} {cubin.tool} {report} {time.time() - start:5.1f} s", flush=True)
        path.write_text(json.dumps(manifest, indent=1) + "\n")


_TMA_LOAD = re.compile(r"^(\s*)(cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes)"
                       r" \[(%r\d+)\], \[(%rd\d+), \{(%r\d+), (%r\d+)\}\], \[(%r\d+)\];$", re.M)


def ptx_variants(directory: Path, base: str, distances: list[int], policies: list[str],
                 releases: list[str] = (), schedules: list[str] = ()) -> list[str]:
    """Experiments below the DSL, on the PTX prepared for ``base`` (K-major for the L2 ones): the
    same module with every operand TMA load followed by an L2 prefetch of the same box ``d``
    k-blocks ahead (``cp.async.bulk.prefetch.tensor``; key ``<base>_l2pf<d>``), or with L2
    eviction policies on the loads of A and B (``createpolicy.fractional``; ``<a>_<b>`` in
    ``policies``, e.g. ``evict_last_evict_first``; key ``<base>_l2_<a>_<b>``), or with fewer
    arrivals on the stages' empty barriers (``releases``; key ``<base>_rel<how>``): a per-thread
    release (``RELEASE="threads"``) made one arrival per warp (``warp``: lane 0, after the warp's
    ``wgmma.wait_group``) or per consumer warpgroup (``warpgroup``: its first thread), and on a
    2-block cluster ``spread`` — per warpgroup, the local arrival by its first warp and the
    remote one by its second, as CUTLASS's cooperative kernels spread them; ``elect``: per warp,
    the lane chosen by ``elect.sync`` at the release.  These rely on a warp's
    ``wgmma.wait_group`` retiring its warpgroup's reads of the stage, which the DSL's model does
    not grant (it asks every reader to arrive, or a barrier before one does).  ``schedules`` (key
    ``<base>_sched<how>``) reorders the consumer's k-block loop, the entry or the exit without
    changing what the kernel computes, or removes its epilogue as a diagnostic (:func:`_rescheduled`).
    They build here
    and run in ``sweep`` beside ``base``, through the backend API and marked as patched: the
    proved module is the unpatched one, so a variant that wins is a reason to express it in the
    DSL (and prove it), not a kernel to ship."""
    from argus.backend_ptx.assemble import build_cubin

    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    entry = manifest[base]
    if (distances or policies) and _majors(entry["variant"]) != ("k", "k"):
        raise SystemExit(f"{base}: the PTX variants assume K-major operands (K is a load's first coordinate)")
    cluster = entry["consts"].get("CLUSTER", 1)
    for how in releases:
        if how not in _RELEASES or (how == "spread" and cluster == 1):
            raise SystemExit(f"release {how!r}: give warp or warpgroup" + (", or spread on a 2-block cluster"
                                                                           if cluster == 1 else " or spread"))
        if entry["consts"].get("RELEASE", "warpgroups") != "threads":
            raise SystemExit(f"{base}: the release variants start from a per-thread release (RELEASE='threads')")
    ptx = pickle.loads((directory / f"{base}.pickle").read_bytes())
    loads = _TMA_LOAD.findall(ptx.text)
    if (distances or policies) and len(loads) != 2:
        raise SystemExit(f"{base}: expected the two operand TMA loads (A, then B) in the PTX, found {len(loads)}")
    bk = entry["consts"].get("BK", 64)

    def patched(distance: int | None, pair: tuple[str, str] | None) -> tuple[str, str]:
        # the policies, created once at entry after the tensor maps' addresses
        made = "".join(f"\n\tcreatepolicy.fractional.L2::{p}.b64 %argus_pol{i}, 1.0;" for i, p in enumerate(pair or ()))
        text = _at_entry(ptx.text, "\n\t.reg .b32 %argus_pk<2>;\n\t.reg .b64 %argus_pol<2>;", made)

        def load(match: re.Match) -> str:
            indent, op, dst, tmap, k, row, bar = match.groups()
            operand = 0 if tmap == loads[0][3] else 1
            if pair is None:
                out = match.group(0)
            else:
                out = f"{indent}{op}.L2::cache_hint [{dst}], [{tmap}, {{{k}, {row}}}], [{bar}], %argus_pol{operand};"
            if distance is not None:
                out += (f"\n{indent}add.s32 %argus_pk{operand}, {k}, {distance * bk};"
                        f"\n{indent}cp.async.bulk.prefetch.tensor.2d.L2.global.tile [{tmap}, {{%argus_pk{operand}, {row}}}];")
            return out

        text = _TMA_LOAD.sub(load, text)
        what = (f"L2 prefetch {distance} k-blocks ahead" if distance is not None else
                f"L2 policies A {pair[0]}, B {pair[1]}")
        return text, what

    jobs = [(f"{base}_l2pf{d}", d, None) for d in distances]
    known = ("evict_first", "evict_last", "evict_normal", "evict_unchanged")
    for spec in policies:
        pair = next(((a, b) for a in known for b in known if spec == f"{a}_{b}"), None)
        if pair is None:
            raise SystemExit(f"policy pair {spec!r}: give <A's>_<B's>, each one of {', '.join(known)}")
        jobs.append((f"{base}_l2_{spec}", None, pair))
    jobs += [(f"{base}_rel{how}", None, how) for how in releases]
    jobs += [(f"{base}_sched{how.replace('+', '_')}", None, ("schedule", how)) for how in schedules]
    made = []
    for key, distance, pair in jobs:
        if isinstance(pair, tuple) and pair[0] == "schedule":
            text, what = _rescheduled(ptx.text, pair[1])
        elif pair in _RELEASES:
            text, what = _fewer_arrivals(ptx.text, pair, cluster)
        else:
            text, what = patched(distance, pair)
        variant = dataclasses.replace(ptx, text=text)
        cubin = build_cubin(variant, f"{entry['kernel_hash']}+{key}", cache=False)
        (directory / f"{key}.cubin").write_bytes(cubin.image)
        (directory / f"{key}.ptx").write_text(text)
        (directory / f"{key}.pickle").write_bytes(pickle.dumps(variant))
        report = [line.strip() for line in cubin.log.splitlines() if "registers" in line or "spill" in line]
        manifest[key] = {**entry, "ptx_sha256": hashlib.sha256(text.encode()).hexdigest(), "tool": cubin.tool,
                         "ptx_patch": what, "gate_here": "PTX patched: not what the gate proved", "ptxas": report}
        made.append(key)
        print(f"{key:24s} {what} {report}", flush=True)
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return made


def _at_entry(text: str, registers: str, code: str) -> str:
    """``text`` with ``registers`` declared after the kernel's 64-bit registers and ``code`` run at
    entry, after the parameters' addresses are converted (the last ``cvta.param``)."""
    declarations = re.search(r"^\t\.reg \.b64 %rd<\d+>;$", text, re.M).group(0)
    text = text.replace(declarations, declarations + registers, 1)
    entry = list(re.finditer(r"^\tcvta\.param\.u64 %rd\d+, %rd\d+;$", text, re.M))[-1]
    return text[:entry.end()] + code + text[entry.end():]


#: how -> (arrivals per block, lane mask, the lane of the local arrival, of the remote one, what)
_RELEASES = {"warp": (8, 31, 0, 0, "warp"), "warpgroup": (2, 127, 0, 0, "warpgroup"),
             "spread": (2, 127, 0, 32, "warpgroup (local and remote from different warps)"),
             "elect": (8, 31, 0, 0, "warp (elect.sync)")}


def _fewer_arrivals(text: str, how: str, cluster: int) -> tuple[str, str]:
    """The PTX of a per-thread release with one arrival per warp or per warpgroup (see
    ``ptx_variants``): the empty barriers' count shrinks to match and the arrivals on them get a
    lane predicate."""
    threads = 256 * cluster  # RELEASE="threads": every consumer thread of every receiving block
    inits = re.findall(rf"^\tmbarrier\.init\.shared::cta\.b64 \[[^\]]+\], {threads};$", text, re.M)
    local = re.findall(r"^\tmbarrier\.arrive\.shared::cta\.b64 _, \[[^\]]+\];$", text, re.M)
    remote = re.findall(r"^\tmbarrier\.arrive\.shared::cluster\.b64 _, \[[^\]]+\];$", text, re.M)
    if not inits or len(local) != 1 or len(remote) != (cluster > 1):
        raise SystemExit(f"expected the empty barriers (count {threads}) and one release, found {len(inits)} "
                         f"inits, {len(local)} local and {len(remote)} remote arrivals")
    per_block, mask, first, second, what = _RELEASES[how]
    for line in inits:
        text = text.replace(line, line.replace(f", {threads};", f", {per_block * cluster};"))
    # "elect": the warp elects its arriving lane at the release (``elect.sync``, which ptxas knows
    # picks one lane of a converged warp) instead of a lane test made at entry
    elect = "\telect.sync _|%argus_rel0, -1;\n" if how == "elect" else ""
    text = text.replace(local[0], f"{elect}\t@%argus_rel0 {local[0][1:]}")
    if remote:
        text = text.replace(remote[0], f"\t@%argus_rel{0 if elect else 1} {remote[0][1:]}")
    made = (f"\n\tmov.u32 %argus_lane, %tid.x;\n\tand.b32 %argus_lane, %argus_lane, {mask};"
            f"\n\tsetp.eq.u32 %argus_rel0, %argus_lane, {first};\n\tsetp.eq.u32 %argus_rel1, %argus_lane, {second};")
    text = _at_entry(text, "\n\t.reg .b32 %argus_lane;\n\t.reg .pred %argus_rel<2>;", made)
    return text, f"one empty-barrier arrival per {what}"


SCHEDULES = ("hoist", "pipe", "hint", "uniformwg", "epihoist", "ring", "syncN", "bfirst", "tmapfetch", "exitread",
             "nostore", "noepi", "noload", "nomma", "stamps", "pair", "n128x2", "n128seq",
             "testwait", "estamps", "defer", "defer3", "defer4")
"""What ``ptx-variants --schedules`` applies (:func:`_rescheduled`); ``a+b`` applies ``a``, then ``b``."""


def _rescheduled(text: str, how: str) -> tuple[str, str]:
    """The PTX with the ``+``-joined schedules of ``how`` applied in turn (experiments for
    ``ptx-variants``, on a K-loop whose consumers retire each k-block's group, ``INFLIGHT=0``).
    All but the last two compute the same values with the same memory effects in each thread:

    * ``hoist``: the wgmma descriptors' arithmetic (the stage index and the shared-memory base,
      registers only) moves above the wait for the stage, so that the first wgmma issues as soon
      as the stage is full;
    * ``pipe``: ``hoist``, and the next k-block's stage, barrier address and phase are computed
      while this k-block's wgmmas run (before ``wgmma.wait_group``), carried in fresh registers;
    * ``hint``: the wait for a full stage passes a suspend-time hint (10 ms) to ``mbarrier.try_wait``;
    * ``uniformwg``: the consumer's warpgroup index (``tid.x >> 7``) is broadcast from lane 0
      (``shfl.sync.idx``), so that ptxas knows it is warp-uniform and keeps A's wgmma descriptors
      on the uniform datapath (no ``R2UR`` per wgmma);
    * ``epihoist``: the epilogue's tile coordinates (the grouped tile order's divisions, which
      depend on the tile number only) are computed before the tile's k-block loop, not after it;
    * ``ring``: the two consumer warpgroups issue their k-blocks strictly in turn (named barriers 2
      and 3 passed back and forth; one more ordering, no value changes);
    * ``syncN`` (``sync16``, say): the two consumer warpgroups meet at a named barrier before every
      N-th k-block of a tile (the epilogue's barrier re-aligns them once per tile);
    * ``bfirst``: the producer issues a stage's B load (the larger box) before its A load;
    * ``tmapfetch``: the thread that initializes the barriers first prefetches every tensor map
      parameter (``prefetch.tensormap``);
    * ``exitread``: the block's wait for its last TMA stores before it exits waits only for their
      reads of shared memory (``cp.async.bulk.wait_group.read``); the global writes complete with
      the grid;
    * ``nostore`` (a diagnostic: C is not written): the TMA stores of C removed, the staging writes
      and barriers kept;
    * ``noepi`` (a diagnostic: C is not written): every tile skips its whole epilogue;
    * ``testwait``: every barrier wait spins on ``mbarrier.test_wait`` instead of ``try_wait``;
    * ``pair``: each warpgroup issues two k-blocks' wgmmas before it waits (:func:`_paired`);
    * ``n128x2`` / ``n128seq``: each ``m64n256k16`` as two ``m64n128k16`` on the accumulator's
      halves, alternating or one half after the other (:func:`_two_chains`);
    * ``defer`` / ``defer3`` / ``defer4``: a tile's last 2 / 3 / 4 C boxes leave during the next
      tile's first k-block (:func:`_deferred_boxes`);
    * ``noload`` / ``nomma`` (diagnostics, C wrong): no operand loads after a block's first
      stages / no wgmmas — the consumers' and the loads' own rates;
    * ``stamps`` / ``estamps`` (diagnostics that compute the same C): ``%clock64`` stamps of each
      k-block / each tile's epilogue, read back by ``timeline``."""
    steps = how.split("+")
    unknown = [one for one in steps if one not in SCHEDULES and not re.fullmatch(r"sync[1-9]\d*", one)]
    if unknown:
        raise SystemExit(f"schedule {unknown[0]!r}: give one of {', '.join(SCHEDULES)}, or several joined by '+'")
    whats = []
    for one in steps:
        text, what = _met_every(text, int(one[4:])) if one.startswith("sync") else _SCHEDULE[one](text)
        whats.append(what)
    return text, "; ".join(whats)


#: the consumer's k-block loop as emitted: the stage and phase of the k-block, the wait for its
#: stage, the wgmmas with their descriptors, the wait for them, the release and the loop test
_K_LOOP = re.compile(r"(?P<head>\$L_loop_\d+):\n(?P<index>(?:(?!\$L_).*\n)*?)(?P<wait>\$L_wait_\d+):\n"
                     r"(?P<try>\tmbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[[^\]]+\], %r\d+;\n)"
                     r"(?P<spin>\t@!%p\d+ bra \$L_wait_\d+;\n)(?P<mma>(?:.*\n)*?)"
                     r"(?P<retire>\twgmma\.wait_group\.sync\.aligned 0;\n)(?P<tail>(?:.*\n)*?)"
                     r"(?P<step>\tadd\.s64 (?P<k>%rd\d+), (?P=k), 1;\n)(?P<test>.*\n\t@%p\d+ bra\.uni (?P=head);\n)")
_PURE = re.compile(r"^\t(?:mad|mul|add|sub|shl|shr|and|or|bfe|cvt|setp|mov)\.[^\n]*;\n", re.M)


def _k_loop(text: str) -> re.Match:
    """The consumers' k-block loop (the one that issues wgmmas) of a prepared GEMM module."""
    loops = [m for m in _K_LOOP.finditer(text) if "wgmma.fence" in m.group("mma")]
    if len(loops) != 1:
        raise SystemExit(f"expected one consumer k-block loop (INFLIGHT=0) in the PTX, found {len(loops)}")
    return loops[0]


def _pure_lines(block: str) -> tuple[str, str]:
    """(the register-only arithmetic lines of ``block``, the other lines), each in order."""
    lines = block.splitlines(keepends=True)
    return "".join(x for x in lines if _PURE.match(x)), "".join(x for x in lines if not _PURE.match(x))


def _with_loop(text: str, m: re.Match, **parts: str) -> str:
    """``text`` with the k-block loop ``m`` rebuilt from its parts, some replaced."""
    g = {**m.groupdict(), **parts}
    body = (f"{g['head']}:\n{g['index']}{g['wait']}:\n{g['try']}{g['spin']}{g['mma']}{g['retire']}{g['tail']}"
            f"{g['step']}{g['test']}")
    return text[:m.start()] + g.get("before", "") + body + text[m.end():]


def _hoist(text: str) -> tuple[str, str]:
    m = _k_loop(text)
    moved, kept = _pure_lines(m.group("mma"))
    return _with_loop(text, m, index=m.group("index") + moved, mma=kept), "wgmma descriptors computed before the stage wait"


def _for_next_k(m: re.Match) -> tuple[list[str], dict[str, str], Callable[[str], str]]:
    """For the k-block loop ``m``: the registers its index arithmetic defines, their fresh twins,
    and a function that rewrites code for k + 1 (the counter ``%argus_k1``, those registers
    fresh)."""
    index, _ = _pure_lines(m.group("index"))
    targets = [d.group(1) for d in (re.match(r"^\t\S+ (%r\w*\d+),", line) for line in index.splitlines()) if d]
    fresh = {t: f"%argus_n{t[1:]}" for t in targets}
    k = m.group("k")

    def renamed(block: str) -> str:
        block = re.sub(rf"{re.escape(k)}\b", "%argus_k1", block)
        return re.sub(r"%r\w*?\d+\b", lambda r: fresh.get(r.group(0), r.group(0)), block)

    return targets, fresh, renamed


def _declared(targets: list[str], fresh: dict[str, str]) -> str:
    return "".join(f"\n\t.reg .{'b64' if t.startswith('%rd') else 'b32'} {fresh[t]};" for t in targets)


def _pipe(text: str) -> tuple[str, str]:
    m = _k_loop(text)
    moved, kept = _pure_lines(m.group("mma"))
    index, _ = _pure_lines(m.group("index"))
    targets, fresh, renamed = _for_next_k(m)
    k = m.group("k")
    ahead = f"\tadd.s64 %argus_k1, {k}, 1;\n" + renamed(index)
    carry = "".join(f"\tmov.{'b64' if t.startswith('%rd') else 'b32'} {t}, {fresh[t]};\n" for t in targets)
    text = _with_loop(text, m, before=index, index=moved, mma=kept + ahead, tail=m.group("tail") + carry)
    return (_at_entry(text, "\n\t.reg .b64 %argus_k1;" + _declared(targets, fresh), ""),
            "next k-block's stage and phase computed under the wgmmas, descriptors before the wait")


def _paired(text: str) -> tuple[str, str]:
    """Each consumer warpgroup issues two k-blocks' wgmmas (two commit groups) before it waits,
    then releases both stages: the loop unrolled by two, the second k-block's stage, barrier
    and phase in fresh registers (a tile with an odd k-block count ends with a single one)."""
    m = _k_loop(text)
    targets, fresh, renamed = _for_next_k(m)
    k = m.group("k")

    def second(block: str) -> str:  # the same code for k + 1, its index registers fresh
        return re.sub(r"\$L_wait_(\d+)", r"$L_argus_wait_\1", renamed(block))

    count = re.search(rf"setp\.lt\.s64 %p\d+, {re.escape(k)}, (%rd\d+);", m.group("test")).group(1)
    label = m.group("head").replace("$L_loop_", "$L_argus_single_")
    wait2 = second(f"{m.group('wait')}:\n{m.group('try')}{m.group('spin')}")
    mma2 = second(m.group("mma")).replace("\twgmma.fence.sync.aligned;\n", "", 1)
    mma = (m.group("mma") + f"\tadd.s64 %argus_k1, {k}, 1;\n\tsetp.lt.s64 %argus_two, %argus_k1, {count};\n"
           f"\t@!%argus_two bra.uni {label}a;\n" + second(m.group("index")) + wait2 + mma2 + f"{label}a:\n")
    tail = m.group("tail") + f"\t@!%argus_two bra.uni {label}b;\n" + second(m.group("tail")) + f"{label}b:\n"
    text = _with_loop(text, m, mma=mma, tail=tail, step=m.group("step").replace(", 1;", ", 2;"))
    return (_at_entry(text, "\n\t.reg .b64 %argus_k1;\n\t.reg .pred %argus_two;" + _declared(targets, fresh), ""),
            "each warpgroup issues two k-blocks (8 wgmmas) before it waits, and releases both stages")


_WGMMA_N256 = re.compile(r"^\twgmma\.mma_async\.sync\.aligned\.m64n256k16\.f32\.(?P<t>\w+\.\w+) \{(?P<acc>[^}]*)\}, "
                         r"(?P<a>%rd\d+), (?P<b>%rd\d+), (?P<rest>[^;]*);\n", re.M)


def _two_chains(text: str, interleave: bool = True) -> tuple[str, str]:
    """Each ``m64n256k16`` wgmma of the k-block loop as two ``m64n128k16`` on the two halves of
    the accumulator (registers 0-63 hold columns 0-127, 64-127 columns 128-255) and of B's stage
    (a K-major 128B-swizzled box: column 128 starts 16 KB further, the descriptor's address field
    ``+ 1024``), so that each warp runs two independent accumulator chains; ``interleave``: the
    halves alternate k-step by k-step (else all of the low half's k-steps come first)."""
    m = _k_loop(text)
    body = m.group("mma")
    found = list(_WGMMA_N256.finditer(body))
    if not found:
        raise SystemExit("n128x2: no m64n256k16 wgmma in the consumers' k-block loop")
    lows, highs, extra = [], [], []
    for i, w in enumerate(found):
        acc = [r.strip() for r in w.group("acc").split(",")]
        hi_b = f"%argus_bh{i}"
        extra.append(hi_b)
        lows.append(f"\twgmma.mma_async.sync.aligned.m64n128k16.f32.{w.group('t')} {{{', '.join(acc[:64])}}}, "
                    f"{w.group('a')}, {w.group('b')}, {w.group('rest')};\n")
        highs.append(f"\tadd.s64 {hi_b}, {w.group('b')}, 1024;\n"
                     f"\twgmma.mma_async.sync.aligned.m64n128k16.f32.{w.group('t')} {{{', '.join(acc[64:])}}}, "
                     f"{w.group('a')}, {hi_b}, {w.group('rest')};\n")
    first = body[:found[0].start()]
    between = [body[found[i].end():found[i + 1].start()] for i in range(len(found) - 1)]
    after = body[found[-1].end():]
    if interleave:
        new = first + "".join(lows[i] + highs[i] + (between[i] if i < len(between) else "") for i in range(len(found)))
    else:  # the descriptors computed between the wgmmas stay before the first one that needs them
        new = first + "".join(between) + "".join(lows) + "".join(highs)
    text = _with_loop(text, m, mma=new + after)
    return (_at_entry(text, "".join(f"\n\t.reg .b64 {r};" for r in extra), ""),
            "each m64n256k16 as two m64n128k16 on the accumulator's halves (two chains per warp"
            + (", alternating)" if interleave else ", one after the other)"))


def _test_waits(text: str) -> tuple[str, str]:
    """Every ``mbarrier.try_wait`` (potentially suspending) spin becomes a ``mbarrier.test_wait``
    (non-blocking) spin."""
    count = len(re.findall(r"\tmbarrier\.try_wait\.parity", text))
    return (text.replace("\tmbarrier.try_wait.parity", "\tmbarrier.test_wait.parity"),
            f"{count} mbarrier waits spin on test_wait instead of try_wait")


def _deferred_boxes(text: str, boxes: int = 2) -> tuple[str, str]:
    """The last ``boxes`` of a tile's four C boxes leave during the next tile's first k-block:
    after that k-block's wgmmas are issued (before the warpgroup waits for them) the consumers
    write those boxes into the staging buffers and store them, from the converted values and
    store coordinates the tile's epilogue left in registers (nothing in between writes them);
    after a block's last tile they leave after the tile loop.  The wait for the TMA reads that
    frees the first deferred box's buffer moves with them.  So those reads and writes run under
    the tensor cores' work instead of before it."""
    m = _k_loop(text)
    drain = re.compile(r"^\twgmma\.wait_group\.sync\.aligned 0;\n", re.M).search(text, m.end())
    back = re.compile(r"^\t@%p\d+ bra\.uni (\$L_loop_\d+);\n(\$L_end_\d+):\n", re.M).search(text, drain.end())
    if back is None or f"{back.group(1)}:" not in text[:m.start()]:
        raise SystemExit("defer: the consumers' tile loop around the k-block loop was not found")
    region = text[drain.end():back.start()]
    bars = [b.start() for b in re.finditer(r"^\tbar\.sync 1, 256;\n", region, re.M)]
    step = re.compile(r"^\tadd\.s64 (%rd\d+), \1, 1;\n\tsetp\.lt\.s64 %p\d+, \1, %rd\d+;\n\Z", re.M).search(region)
    if len(bars) != 8 or step is None:
        raise SystemExit(f"defer: expected four boxes of two barriers each in the epilogue, found {len(bars)} barriers")
    cut = bars[2 * (4 - boxes)]
    # the wait for the reads that free the first deferred box's buffer (by the thread that stores)
    freeing = list(re.finditer(r"^\t@!(%p\d+) bra \$L_endif_\d+;\n(?:(?!\$L_).*\n)*?"
                               r"(\tcp\.async\.bulk\.wait_group\.read \d+;\n)", region[:cut], re.M))
    if not freeing:
        raise SystemExit("defer: the wait for the staging buffer's reads was not found")
    wait = freeing[-1]
    region = region[:wait.start(2)] + region[wait.end(2):]
    cut -= wait.end(2) - wait.start(2)
    step = re.compile(r"^\tadd\.s64 (%rd\d+), \1, 1;\n\tsetp\.lt\.s64 %p\d+, \1, %rd\d+;\n\Z", re.M).search(region)
    deferred = f"\t@{wait.group(1)} {wait.group(2)[1:]}" + region[cut:step.start()]
    # every register the deferred boxes read must hold the tile's value until the next tile's first
    # k-block: nothing from the tile loop's head to that k-block's commit may write it
    written_inside = set(re.findall(r"^\t(?:@!?%p\d+ )?[a-z][\w.:]* (%\w+),", deferred, re.M))
    read = set(re.findall(r"%(?:r|rd|vr\d+_|p)\d+", deferred)) - written_inside
    head = text.rindex(f"{back.group(1)}:", 0, m.start())
    path = text[head:m.start()] + m.group(0)[:m.start("retire") - m.start()]
    clobbered = read & set(re.findall(r"^\t(?:@!?%p\d+ )?[a-z][\w.:]* (%\w+),", path, re.M))
    if clobbered:
        raise SystemExit(f"defer: the next tile's start overwrites {sorted(clobbered)} before the flush")

    def copy(tag: str) -> str:
        body = re.sub(r"\$L_endif_(\d+)", rf"$L_argus_{tag}_\1", deferred)
        return (f"\t@!%argus_pending bra.uni $L_argus_flushed_{tag};\n{body}"
                f"\tsetp.ne.s32 %argus_pending, 1, 1;\n$L_argus_flushed_{tag}:\n")

    region = region[:cut] + "\tsetp.eq.s32 %argus_pending, 1, 1;\n" + region[step.start():]
    text = text[:drain.end()] + region + back.group(0) + copy("b") + text[back.end():]
    text = _with_loop(text, m, retire=copy("a") + m.group("retire"))
    return (_at_entry(text, "\n\t.reg .pred %argus_pending;", "\n\tsetp.ne.s32 %argus_pending, 1, 1;"),
            f"a tile's last {boxes} C boxes written and stored during the next tile's first k-block")


def _hint(text: str) -> tuple[str, str]:
    m = _k_loop(text)
    return _with_loop(text, m, **{"try": m.group("try").replace(";\n", ", 10000000;\n")}), \
        "suspend-time hint on the consumer's stage wait"


def _uniform_warpgroup(text: str) -> tuple[str, str]:
    found = re.findall(r"^\tcvt\.s64\.s32 (%rd\d+), (%r\d+);\n\tshr\.s64 (%rd\d+), \1, 7;$", text, re.M)
    if len(found) != 1:
        raise SystemExit(f"expected one 64-bit tid.x >> 7 in the PTX, found {len(found)}")
    wide, tid, wg = found[0]
    old = f"\tcvt.s64.s32 {wide}, {tid};\n\tshr.s64 {wg}, {wide}, 7;"
    new = (f"\tcvt.s64.s32 {wide}, {tid};\n\tshr.s32 %argus_wg, {tid}, 7;\n"
           f"\tshfl.sync.idx.b32 %argus_wg, %argus_wg, 0, 31, -1;\n\tcvt.s64.s32 {wg}, %argus_wg;")
    return (_at_entry(text.replace(old, new), "\n\t.reg .b32 %argus_wg;", ""),
            "the warpgroup index broadcast from lane 0 (warp-uniform for ptxas)")


def _epilogue_prelude_hoisted(text: str) -> tuple[str, str]:
    m = _k_loop(text)
    end = re.compile(r"^\$L_end_\d+:\n", re.M).match(text, m.end())
    drain = re.compile(r"^\t// [^\n]*\n\twgmma\.wait_group\.sync\.aligned 0;\n", re.M).search(text, end.end())
    prelude = text[end.end():drain.start()]
    if re.search(r"%vr|wgmma|mbarrier|bar\.|ld\.|st\.", prelude):
        raise SystemExit("the code between the k-block loop and its drain is not index arithmetic only")
    start = list(re.finditer(rf"^\tmov\.b64 {re.escape(m.group('k'))}, 0;\n", text[:m.start()], re.M))[-1]
    text = text[:start.start()] + prelude + text[start.start():end.end()] + text[drain.start():]
    return text, f"the epilogue's tile coordinates ({prelude.count(chr(10))} lines) computed before the k-block loop"


def _issue_ring(text: str) -> tuple[str, str]:
    """Warpgroup 0 issues k-block ``j`` only after warpgroup 1 issued ``j - 1``, and warpgroup 1
    issues ``j`` only after warpgroup 0 did (named barriers 2 and 3, 256 threads: one warpgroup
    arrives, the other waits); warpgroup 1 hands over the first turn at its start and warpgroup 0
    takes the last one back at its end."""
    m = _k_loop(text)
    head = re.findall(r"^(\$L_loop_\d+):$", text[:m.start()], re.M)[-1]  # the consumers' tile loop
    back = re.compile(rf"^\t@%p\d+ bra\.uni {re.escape(head)};\n\$L_end_\d+:\n", re.M).search(text, m.end())
    grow = re.search(r"^\tsetmaxnreg\.inc\.sync\.aligned\.u32 \d+;\n", text, re.M)
    fence = re.compile(r"^\twgmma\.fence\.sync\.aligned;\n", re.M).search(text, m.start(), m.end())
    commit = re.compile(r"^\twgmma\.commit_group\.sync\.aligned;\n", re.M).search(text, m.start(), m.end())
    turn = "\t@%argus_wg0 bar.sync 2, 256;\n\t@!%argus_wg0 bar.sync 3, 256;\n"
    done = "\t@%argus_wg0 bar.arrive 3, 256;\n\t@!%argus_wg0 bar.arrive 2, 256;\n"
    text = (text[:grow.end()] + "\t@!%argus_wg0 bar.arrive 2, 256;\n" + text[grow.end():fence.start()] + turn
            + text[fence.start():commit.end()] + done + text[commit.end():back.end()]
            + "\t@%argus_wg0 bar.sync 2, 256;\n" + text[back.end():])
    text = _at_entry(text, "\n\t.reg .b32 %argus_tid;\n\t.reg .pred %argus_wg0;",
                     "\n\tmov.u32 %argus_tid, %tid.x;\n\tsetp.lt.u32 %argus_wg0, %argus_tid, 256;")
    return text, "the consumer warpgroups issue their k-blocks in turn (named barriers 2 and 3)"


def _met_every(text: str, n: int) -> tuple[str, str]:
    m = _k_loop(text)
    k = m.group("k")
    modulo = f"and.b64 %argus_kmod, {k}, {n - 1}" if n & (n - 1) == 0 else f"rem.u64 %argus_kmod, {k}, {n}"
    meet = f"\t{modulo};\n\tsetp.eq.s64 %argus_meet, %argus_kmod, 0;\n\t@%argus_meet bar.sync 2, 256;\n"
    text = _with_loop(text, m, index=meet + m.group("index"))
    return (_at_entry(text, "\n\t.reg .b64 %argus_kmod;\n\t.reg .pred %argus_meet;", ""),
            f"the consumer warpgroups meet every {n} k-blocks (named barrier 2)")


def _b_first(text: str) -> tuple[str, str]:
    loads = list(_TMA_LOAD.finditer(text))
    if len(loads) != 2:
        raise SystemExit(f"expected the two operand TMA loads (A, then B) in the PTX, found {len(loads)}")
    a, b = loads
    text = text[:a.start()] + text[a.end() + 1:b.end()] + "\n" + a.group(0) + text[b.end():]
    return text, "the producer issues B's load before A's"


def _tensormaps_prefetched(text: str) -> tuple[str, str]:
    maps = re.findall(r"^\tcvta\.param\.u64 (%rd\d+), %rd\d+;$", text, re.M)
    init = re.search(r"^\tmbarrier\.init\.", text, re.M)
    fetch = "".join(f"\tprefetch.tensormap [{r}];\n" for r in maps)
    return text[:init.start()] + fetch + text[init.start():], f"prefetch.tensormap of {len(maps)} tensor maps at entry"


def _exit_waits_for_reads(text: str) -> tuple[str, str]:
    last = list(re.finditer(r"^\tcp\.async\.bulk\.wait_group 0;$", text, re.M))
    if not last or not re.match(r"\s*(\$L_endif_\d+:\s*)*ret;", text[last[-1].end():]):
        raise SystemExit("expected a full cp.async.bulk.wait_group 0 just before the kernel returns")
    m = last[-1]
    return (text[:m.start()] + "\tcp.async.bulk.wait_group.read 0;" + text[m.end():],
            "the exit's wait for the last TMA stores waits for their shared-memory reads only")


def _without_stores(text: str) -> tuple[str, str]:
    stores = re.findall(r"^\tcp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.tile\.bulk_group .*\n", text, re.M)
    for line in stores:
        text = text.replace(line, "")
    return text, f"diagnostic: the {len(stores)} TMA stores of C removed (the staging writes and barriers stay)"


def _without_epilogue(text: str) -> tuple[str, str]:
    """Each tile skips its whole epilogue (conversion, staging, barriers, stores) and goes on to
    the next; the accumulator is summed and stored under a condition that never holds (``M ==
    -1``), so that ptxas keeps the wgmmas."""
    m = _k_loop(text)
    acc = re.search(r"wgmma\.mma_async\S* \{([^}]*)\}", m.group("mma")).group(1).replace(" ", "").split(",")
    drain = re.compile(r"^\twgmma\.wait_group\.sync\.aligned 0;\n", re.M).search(text, m.end())
    head = re.findall(r"^(\$L_loop_\d+):$", text[:m.start()], re.M)[-1]  # the consumers' tile loop
    back = re.compile(rf"^\tadd\.s64 (%rd\d+), \1, 1;\n\tsetp\.lt\.s64 %p\d+, \1, %rd\d+;\n\t@%p\d+ bra\.uni "
                      rf"{re.escape(head)};$", re.M).search(text, drain.end())
    rows = re.search(r"ld\.param\.s32 (%r\d+), \[p_M\];", text).group(1)
    c = re.search(r"ld\.param\.u64 (%rd\d+), \[p_c\];\n\tcvta\.to\.global\.u64 (%rd\d+), \1;", text).group(2)
    total = f"\tmov.f32 %argus_sum, {acc[0]};\n" + "".join(f"\tadd.f32 %argus_sum, %argus_sum, {r};\n" for r in acc[1:])
    skip = (f"{total}\tsetp.eq.s32 %argus_never, {rows}, -1;\n\t@%argus_never st.global.f32 [{c}], %argus_sum;\n"
            f"\tbra.uni $L_argus_next_tile;\n")
    text = text[:drain.end()] + skip + text[drain.end():back.start()] + "$L_argus_next_tile:\n" + text[back.start():]
    return (_at_entry(text, "\n\t.reg .f32 %argus_sum;\n\t.reg .pred %argus_never;", ""),
            "diagnostic: no epilogue (C never written; the accumulator kept live)")


def _without_loads(text: str) -> tuple[str, str]:
    """A diagnostic: after a block's first ``STAGES`` k-blocks its producer marks each stage full
    without loading it (a plain arrive instead of the expected transaction and the two TMA loads),
    so the consumers run on stale operands with no memory traffic (C is wrong)."""
    found = re.search(r"\tand\.b64 %rd\d+, (?P<it>%rd\d+), (?P<mask>\d+);\n(?:.*\n)*?"
                      r"(?P<expect>\tmbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, (?P<full>\[[^\]]+\]), \d+;\n)",
                      text)
    loads = list(_TMA_LOAD.finditer(text))
    if found is None or len(loads) != 2 or "multicast" in text:
        raise SystemExit("noload: expected one unclustered producer (an expected transaction and two TMA loads)")
    stages = int(found.group("mask")) + 1
    filled = (f"\tsetp.lt.s64 %argus_fill, {found.group('it')}, {stages};\n\t@%argus_fill "
              f"{found.group('expect')[1:]}\t@!%argus_fill mbarrier.arrive.shared::cta.b64 _, {found.group('full')};\n")
    for m in reversed(loads):
        text = text[:m.start()] + "\t@%argus_fill " + m.group(0).lstrip("\t") + text[m.end():]
    text = text[:found.start("expect")] + filled + text[found.end("expect"):]
    return (_at_entry(text, "\n\t.reg .pred %argus_fill;", ""),
            f"diagnostic: no operand loads after a block's first {stages} k-blocks (stale operands, C wrong)")


def _without_mmas(text: str) -> tuple[str, str]:
    """A diagnostic: the consumers issue no wgmma (they wait for each stage and release it), so the
    kernel runs at the rate its loads alone allow (C is wrong)."""
    m = _k_loop(text)
    mma = re.sub(r"^\twgmma\.mma_async[^\n]*\n", "", m.group("mma"), flags=re.M)
    return _with_loop(text, m, mma=mma), "diagnostic: no wgmma (the loads' own rate; C wrong)"


#: the per-block capacity of the ``stamps`` diagnostic: k-blocks recorded per block (later ones are not)
STAMP_CAP = 512
#: what each of a k-block's eight stamps records (``%clock64`` of the block's SM)
STAMP_SLOTS = ("producer_wake", "arrived", "probe_wg0", "probe_wg1", "got_wg0", "got_wg1", "released_wg0",
               "released_wg1")


def _stamped(text: str) -> tuple[str, str]:
    """A diagnostic that records, for each k-block a block runs (its ordinal ``it`` among the
    block's k-blocks, up to :data:`STAMP_CAP`), eight ``%clock64`` values into the module global
    ``argus_stamps[block][it][slot]`` (:data:`STAMP_SLOTS`): when the producer's wait for the empty
    stage ends (it issues the loads next); when the stage's ``full`` barrier completes, seen by an
    observer (thread 32, a producer warp that does nothing else, waiting on every stage in turn;
    it is no party to any barrier, so it delays nobody); per consumer warpgroup (its first
    thread) when it starts to wait for the stage, when the wait ends and when it released the
    stage.  The kernel computes the same C."""
    m = _k_loop(text)
    producer = re.search(r"(?P<index>\tand\.b64 %rd\d+, (?P<it>%rd\d+), (?P<mask>\d+);\n(?:.*\n)*?)"
                         r"(?P<branch>\t@!%p1 bra \$L_endif_\d+;\n)"
                         r"(?P<pre>(?:.*\n)*?)\tmad\.lo\.s32 %r\d+, %r\d+, 8, (?P<base>%r\d+);\n(?:.*\n)*?"
                         r"(?P<wait>\$L_wait_\d+):\n"
                         r"\tmbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[%r\d+\+(?P<empty>\d+)\], %r\d+;\n"
                         r"\t@!%p\d+ bra (?P=wait);\n"
                         r"(?P<expect>(?:\t//.*\n)?\tmbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, "
                         r"\[%r\d+\+(?P<full>\d+)\], \d+;\n)", text[:m.start()])
    if producer is None or re.search(r"\tsetp\.eq\.s32 %p1, %r1, 0;\n", text) is None:
        raise SystemExit("stamps: the producer's loop (thread 0's wait for an empty stage) was not found")
    it, stages = producer.group("it"), int(producer.group("mask")) + 1
    if stages & (stages - 1):
        raise SystemExit(f"stamps: {stages} stages; the producer's stage index is not a mask")
    shift = stages.bit_length() - 1

    def stamp(iteration: str, slot: str | int, guard: str) -> str:  # slot: a register or a constant
        offset = (f"\tmul.wide.u32 %argus_o, {slot}, 8;\n\tadd.s64 %argus_a, %argus_a, %argus_o;\n"
                  if isinstance(slot, str) else f"\tadd.s64 %argus_a, %argus_a, {8 * slot};\n")
        return (f"\tmov.u64 %argus_t, %clock64;\n\tsetp.lt.s64 %argus_in, {iteration}, {STAMP_CAP};\n"
                f"\tand.pred %argus_in, %argus_in, {guard};\n"
                f"\tshl.b64 %argus_a, {iteration}, 6;\n\tadd.s64 %argus_a, %argus_a, %argus_block;\n{offset}"
                f"\t@%argus_in st.global.u64 [%argus_a], %argus_t;\n")

    observe = (f"\tsetp.eq.s32 %argus_obs, %r1, 32;\n\t@!%argus_obs bra $L_argus_observed;\n"
               f"\tcvt.u32.u64 %argus_s, {it};\n\tand.b32 %argus_s, %argus_s, {stages - 1};\n"
               f"\tmad.lo.s32 %argus_s, %argus_s, 8, {producer.group('base')};\n"
               f"\tshr.u64 %argus_o, {it}, {shift};\n\tcvt.u32.u64 %argus_ph, %argus_o;\n"
               f"\tand.b32 %argus_ph, %argus_ph, 1;\n$L_argus_observe:\n"
               f"\tmbarrier.try_wait.parity.shared::cta.b64 %argus_ok, [%argus_s+{producer.group('full')}], %argus_ph;\n"
               f"\t@!%argus_ok bra $L_argus_observe;\n{stamp(it, 1, '%argus_obs')}$L_argus_observed:\n")
    woke = stamp(it, 0, "%p1")
    start, end = producer.start("branch"), producer.start("expect")
    head = text[:m.start()]
    head = head[:start] + observe + head[start:end] + woke + head[end:]
    # the consumers: the k-block's ordinal is the first masked index of the loop's head
    cit = re.search(rf"\tand\.b64 %rd\d+, (%rd\d+), {stages - 1};\n", m.group("index"))
    if cit is None:
        raise SystemExit("stamps: the consumers' k-block ordinal was not found")
    c = cit.group(1)
    loop = _with_loop("", m, wait=stamp(c, "%argus_wg", "%argus_lead") + m.group("wait"),
                      mma=stamp(c, "%argus_wg2", "%argus_lead") + m.group("mma"),
                      tail=m.group("tail") + stamp(c, "%argus_wg4", "%argus_lead"))
    text = head + loop + text[m.end():]
    registers = ("\n\t.reg .b64 %argus_t;\n\t.reg .b64 %argus_a;\n\t.reg .b64 %argus_o;\n\t.reg .b64 %argus_block;"
                 "\n\t.reg .pred %argus_in;\n\t.reg .pred %argus_obs;\n\t.reg .pred %argus_ok;\n\t.reg .pred %argus_lead;"
                 "\n\t.reg .b32 %argus_s;\n\t.reg .b32 %argus_ph;\n\t.reg .b32 %argus_wg;\n\t.reg .b32 %argus_wg2;"
                 "\n\t.reg .b32 %argus_wg4;")
    setup = (f"\n\tmov.u64 %argus_block, argus_stamps;\n\tmul.wide.u32 %argus_o, %r2, {STAMP_CAP * 64};\n"
             f"\tadd.s64 %argus_block, %argus_block, %argus_o;\n\tand.b32 %argus_wg, %r1, 127;\n"
             f"\tsetp.eq.s32 %argus_lead, %argus_wg, 0;\n\tshr.u32 %argus_wg, %r1, 7;\n"
             f"\tadd.s32 %argus_wg, %argus_wg, 1;\n"  # warpgroup 1 -> slot 2, warpgroup 2 -> slot 3
             f"\tadd.s32 %argus_wg2, %argus_wg, 2;\n\tadd.s32 %argus_wg4, %argus_wg, 4;")
    text = _at_entry(text, registers, setup)
    blocks = 160  # more than any Hopper part's SM count
    text = text.replace(".extern .shared", f".global .align 8 .b64 argus_stamps[{blocks * STAMP_CAP * 8}];\n"
                        ".extern .shared", 1)
    return text, f"diagnostic: %clock64 stamps of each k-block ({', '.join(STAMP_SLOTS)})"


#: the epilogue stamps' capacity: tiles per block, stamps per tile and consumer warpgroup
ESTAMP_TILES, ESTAMP_SLOTS = 32, 24


def _epilogue_stamped(text: str) -> tuple[str, str]:
    """A diagnostic that records ``%clock64`` at the steps of each tile's epilogue into the module
    global ``argus_estamps[block][tile][warpgroup][slot]`` (up to :data:`ESTAMP_TILES` tiles of a
    block), by the first thread of each consumer warpgroup: slot 0 when the last k-block's wgmmas
    retired (the drain), then after each step of the epilogue in order — a named barrier, the
    wait for a TMA store's reads (thread 128 only) — and the last slot filled when the tile's
    epilogue is done (before the next tile's k-block loop).  The kernel computes the same C."""
    m = _k_loop(text)
    tile = re.search(r"\tmul\.lo\.s64 %rd\d+, (%rd\d+), %rd\d+;\n", m.group("index"))
    drain = re.compile(r"^\twgmma\.wait_group\.sync\.aligned 0;\n", re.M).search(text, m.end())
    back = re.compile(r"^\t@%p\d+ bra\.uni (\$L_loop_\d+);\n", re.M).search(text, drain.end())
    if tile is None or drain is None or back is None or f"{back.group(1)}:" not in text[:m.start()]:
        raise SystemExit("estamps: the consumers' tile loop around the k-block loop was not found")
    tile = tile.group(1)
    steps = re.compile(r"^\t(?:bar\.sync 1, 256|cp\.async\.bulk\.wait_group\.read \d+);\n", re.M)

    def stamp(slot: int) -> str:
        return (f"\tmov.u64 %argus_et, %clock64;\n\tsetp.lt.s64 %argus_ein, {tile}, {ESTAMP_TILES};\n"
                f"\tand.pred %argus_ein, %argus_ein, %argus_elead;\n"
                f"\tmul.lo.s64 %argus_ea, {tile}, {2 * ESTAMP_SLOTS * 8};\n\tadd.s64 %argus_ea, %argus_ea, %argus_eblock;\n"
                f"\tadd.s64 %argus_ea, %argus_ea, {8 * slot};\n\t@%argus_ein st.global.u64 [%argus_ea], %argus_et;\n")

    region = text[drain.end():back.start()]
    out, slot, last = [stamp(0)], 1, 0
    for step in steps.finditer(region):
        if slot >= ESTAMP_SLOTS - 1:
            raise SystemExit(f"estamps: more than {ESTAMP_SLOTS - 2} epilogue steps")
        out.append(region[last:step.end()] + stamp(slot))
        slot, last = slot + 1, step.end()
    # the end of the epilogue: before the tile counter's step and the loop test
    tail = re.compile(r"^\tadd\.s64 (%rd\d+), \1, 1;\n(?=\tsetp\.lt\.s64 %p\d+, \1, %rd\d+;\n\Z)", re.M)
    rest = region[last:]
    end = tail.search(rest)
    if end is None:
        raise SystemExit("estamps: the tile loop's step was not found")
    out.append(rest[:end.start()] + stamp(ESTAMP_SLOTS - 1) + rest[end.start():])
    text = text[:drain.end()] + "".join(out) + text[back.start():]
    registers = ("\n\t.reg .b64 %argus_et;\n\t.reg .b64 %argus_ea;\n\t.reg .b64 %argus_eo;\n\t.reg .b64 %argus_eblock;"
                 "\n\t.reg .pred %argus_ein;\n\t.reg .pred %argus_elead;\n\t.reg .b32 %argus_ew;")
    setup = (f"\n\tmov.u64 %argus_eblock, argus_estamps;\n"
             f"\tmul.wide.u32 %argus_eo, %r2, {ESTAMP_TILES * 2 * ESTAMP_SLOTS * 8};\n"
             f"\tadd.s64 %argus_eblock, %argus_eblock, %argus_eo;\n\tand.b32 %argus_ew, %r1, 127;\n"
             f"\tsetp.eq.s32 %argus_elead, %argus_ew, 0;\n\tshr.u32 %argus_ew, %r1, 7;\n"
             f"\tmax.u32 %argus_ew, %argus_ew, 1;\n\tsub.u32 %argus_ew, %argus_ew, 1;\n"  # warpgroup 1 -> 0, 2 -> 1
             f"\tmul.wide.u32 %argus_eo, %argus_ew, {ESTAMP_SLOTS * 8};\n\tadd.s64 %argus_eblock, %argus_eblock, %argus_eo;")
    text = _at_entry(text, registers, setup)
    text = text.replace(".extern .shared", f".global .align 8 .b64 argus_estamps[{160 * ESTAMP_TILES * 2 * ESTAMP_SLOTS}];\n"
                        ".extern .shared", 1)
    return text, f"diagnostic: %clock64 stamps of each tile's epilogue ({slot - 1} steps)"


_SCHEDULE = {"hoist": _hoist, "pipe": _pipe, "hint": _hint, "uniformwg": _uniform_warpgroup,
             "epihoist": _epilogue_prelude_hoisted, "ring": _issue_ring, "bfirst": _b_first,
             "tmapfetch": _tensormaps_prefetched, "exitread": _exit_waits_for_reads, "nostore": _without_stores,
             "noepi": _without_epilogue, "testwait": _test_waits, "pair": _paired, "n128x2": _two_chains,
             "n128seq": functools.partial(_two_chains, interleave=False), "defer": _deferred_boxes,
             "defer3": functools.partial(_deferred_boxes, boxes=3), "defer4": functools.partial(_deferred_boxes, boxes=4),
             "noload": _without_loads, "nomma": _without_mmas, "stamps": _stamped, "estamps": _epilogue_stamped}


# --------------------------------------------------------------------------- run (GPU)


def _compiled(directory: Path, key: str, entry: dict, sms: int):
    """(kernel, how it passed the gate): through ``argus.compile`` when a proof record exists,
    else through the backend's internal API with the module and cubin prepared here."""
    from argus.backend_ptx.assemble import build_cubin
    from argus.backend_ptx.emit import emit_ptx
    from argus.runtime import CompiledKernel, VerificationRequired, compile
    from argus.runtime.gate import require_proof
    from argus.spec.kernel import kernel_hash

    kernel = _kernel(entry["variant"])
    sms = entry["consts"].get("SMS", sms)  # a key with its own persistent grid keeps it
    specialized = kernel.specialize(**_with_grid(entry["consts"], sms))
    if entry.get("ptx_patch"):  # an experiment on the emitted PTX: the gate's module is not what runs
        return (CompiledKernel(specialized, None, *_prepared(directory, key, entry)),
                f"PTX patched after emission ({entry['ptx_patch']}): an experiment, timed through the backend API")
    try:
        require_proof(specialized, verify=False)
        return compile(kernel, **_with_grid(entry["consts"], sms)), "proved (proof record); argus.compile"
    except VerificationRequired as refusal:
        gate = f"gate: refused ({str(refusal).splitlines()[0][:160]}), timed through the backend API"
    if sms != entry["sms"] or kernel_hash(specialized) != entry["kernel_hash"]:
        ptx = emit_ptx(specialized, "sm_90a", root=str(ROOT))  # another SM count: build here
        return CompiledKernel(specialized, None, ptx, build_cubin(ptx, kernel_hash(specialized))), gate + "; built here"
    # the same IR after policies (kernel hash): the module emitted from it when preparing
    return CompiledKernel(specialized, None, *_prepared(directory, key, entry)), gate + f"; prepared cubin ({entry['tool']})"


def _prepared(directory: Path, key: str, entry: dict) -> tuple:
    """(PTX module, cubin) that ``prepare`` (or ``ptx-variants``) saved for ``key``, the module
    checked against the manifest's hash."""
    from argus.backend_ptx.assemble import Cubin

    ptx = pickle.loads((directory / f"{key}.pickle").read_bytes())
    assert hashlib.sha256(ptx.text.encode()).hexdigest() == entry["ptx_sha256"]
    return ptx, Cubin((directory / f"{key}.cubin").read_bytes(), entry["ptx_sha256"], entry["tool"], "", True)


def _torch_dtype(name: str):
    import torch

    return {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[name]


def _majors(variant: str) -> tuple[str, str]:
    """Which index of A and of B is contiguous: ``k``, or ``m`` (A stored K x M) / ``n`` (B stored K x N)."""
    return tuple(VARIANTS[variant][4:6]) if len(VARIANTS[variant]) > 4 else ("k", "k")


def _matmul_operands(variant: str, args: dict) -> tuple:
    """A as M x K and B as K x N, as torch views of the stored operands (transposes are views:
    cuBLAS reads each operand in its stored layout)."""
    a_major, b_major = _majors(variant)
    return (args["a"] if a_major == "k" else args["a"].t()), (args["b"].t() if b_major == "k" else args["b"])


def _inputs(variant: str, shape: tuple[int, int, int], seed: int) -> dict:
    import torch

    tin, tout, bias, _ = VARIANTS[variant][:4]
    a_major, b_major = _majors(variant)
    m, n, k = shape
    g = torch.Generator(device="cuda").manual_seed(seed)
    args = {"a": torch.randn(*((m, k) if a_major == "k" else (k, m)), device="cuda", generator=g).to(_torch_dtype(tin)),
            "b": torch.randn(*((n, k) if b_major == "k" else (k, n)), device="cuda", generator=g).to(_torch_dtype(tin)),
            "c": torch.full((m, n), float("nan"), device="cuda", dtype=_torch_dtype(tout))}
    if bias:
        args["bias"] = torch.randn(n, device="cuda", generator=g)
    return args


def _torch_gemm(variant: str, args: dict):
    import torch

    _, tout, bias, activation = VARIANTS[variant][:4]
    out = torch.matmul(*_matmul_operands(variant, args))
    if bias:
        out = out + args["bias"].to(out.dtype)
    if activation == "relu":
        out = torch.relu(out)
    return out.to(_torch_dtype(tout))


def _reference(variant: str, args: dict):
    import torch

    _, _, bias, activation = VARIANTS[variant][:4]
    a, b = _matmul_operands(variant, args)
    ref = a.double() @ b.double()
    if bias:
        ref = ref + args["bias"].double()
    if activation == "relu":
        ref = torch.relu(ref)
    return ref


def _launch(compiled, variant: str, args: dict) -> None:
    if VARIANTS[variant][2]:
        compiled(args["a"], args["b"], args["c"], args["bias"])
    else:
        compiled(args["a"], args["b"], args["c"])


def _check(compiled, variant: str, shape: tuple[int, int, int], seed: int) -> dict:
    import torch

    args = _inputs(variant, shape, seed)
    _launch(compiled, variant, args)
    torch.cuda.synchronize()
    out = args["c"]
    ref = _reference(variant, args)
    mine = _torch_gemm(variant, args)
    rel, rel_torch = _relative_error(out, ref), _relative_error(mine, ref)
    nan = int(torch.isnan(out).sum().item())
    tol = TOLERANCE[VARIANTS[variant][1]]
    ok = nan == 0 and rel <= tol
    return {"variant": variant, "shape": list(shape), "ok": ok, "rel_err": rel, "torch_rel_err": rel_torch,
            "max_abs_err": float((out.double() - ref).abs().max().item()),
            "torch_max_abs_err": float((mine.double() - ref).abs().max().item()), "nan": nan, "tolerance": tol}


def _relative_error(out, ref) -> float:
    """The relative Frobenius error of ``out`` against the float64 ``ref``."""
    return (out.double() - ref).norm().item() / (ref.norm().item() or 1.0)


def _envelope(results: dict) -> dict:
    import subprocess

    import torch

    info = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "command": " ".join(sys.argv),
            "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "sms": torch.cuda.get_device_properties(0).multi_processor_count}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        info["nvidia_smi"] = smi.stdout.strip()
    except Exception as err:  # reported, not fatal
        info["nvidia_smi"] = str(err)
    return {"info": info, **results}


def run(directory: Path, out: Path, repeat: int, tune_repeat: int, skip_tune: bool) -> None:
    import torch

    from argus.runtime.timing import benchmark

    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ARGUS_CACHE_DIR", "/tmp/argus-cache")
    manifest = json.loads((directory / "manifest.json").read_text())
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results: dict = {"gate": {}, "checks": [], "autotune": {}, "benchmark": []}

    def save() -> None:
        (out / "gemm.json").write_text(json.dumps(_envelope(results), indent=1) + "\n")

    compiled = {}
    for key, entry in manifest.items():
        compiled[key], results["gate"][key] = _compiled(directory, key, entry, sms)
        print(f"{key:14s} {results['gate'][key]}", flush=True)
    save()

    # 1. correctness: every variant at the odd shapes, the default candidate at every benchmarked shape
    for key, entry in manifest.items():
        shapes = ODD_SHAPES
        if key == _default_key() or entry["consts"].get("CLUSTER", 1) > 1:  # the default and every cluster shape
            shapes = ODD_SHAPES + SHAPES
        elif entry["variant"] == "main":
            shapes = ODD_SHAPES[:2]
        if _majors(entry["variant"]) != ("k", "k"):  # the layouts: every shape whose row pitches TMA takes
            shapes = [s for s in ODD_SHAPES + SHAPES if _majors(entry["variant"])[0] == "k" or s[0] % 8 == 0]
        for i, shape in enumerate(shapes):
            r = _check(compiled[key], entry["variant"], shape, seed=100 + i)
            r["key"] = key
            results["checks"].append(r)
            print(f"check {key:14s} {'x'.join(map(str, shape)):18s} {'ok' if r['ok'] else 'FAIL'} rel {r['rel_err']:.2e} "
                  f"(torch {r['torch_rel_err']:.2e}) nan {r['nan']}", flush=True)
        save()
    good = {key for key in compiled if all(r["ok"] for r in results["checks"] if r["key"] == key)}

    def flops(shape):
        m, n, k = shape
        return 2.0 * m * n * k

    # 2. the autotuner: every passing candidate of the main variant at every shape
    # CANDIDATES, and a candidate at another persistent grid where the gate passed it (a proof record)
    candidates = [k for k in manifest if k in good and (re.fullmatch(r"main_c\d+", k) or (
        re.fullmatch(r"main_c\d+_sms\d+", k) and results["gate"][k].startswith("proved")))]
    for shape in SHAPES:
        sets = [_inputs("main", shape, seed=7 + r) for r in range(2)]
        if skip_tune or len(candidates) == 1:
            results["autotune"][str(shape)] = {"best": _default_key() if _default_key() in candidates
                                               else candidates[0]}
            continue
        fns = {k: (lambda a, k=k: _launch(compiled[k], "main", a)) for k in candidates}
        timings = benchmark(fns, lambda r, sets=sets: (sets[r],), rotations=2, warmup=2, repeat=tune_repeat)
        best = min(timings, key=lambda k: timings[k].median)
        results["autotune"][str(shape)] = {"best": best, "ms": {k: t.median for k, t in timings.items()},
                                           "consts": manifest[best]["consts"]}
        print(f"tune {'x'.join(map(str, shape)):18s} " + " ".join(f"{k}={t.median:.3f}" for k, t in timings.items())
              + f" -> {best}", flush=True)
        save()
        sets = []
        torch.cuda.empty_cache()

    # 3. the benchmark: best candidate vs cuBLAS, interleaved, L2 flushed, >= 50 timed runs
    for shape in SHAPES:
        best = results["autotune"][str(shape)]["best"]
        sets = [_inputs("main", shape, seed=11 + r) for r in range(2)]
        timings = benchmark({"argus": lambda a, best=best: _launch(compiled[best], "main", a),
                             "torch": lambda a: torch.matmul(a["a"], a["b"].t())},
                            lambda r, sets=sets: (sets[r],), rotations=2, warmup=3, repeat=repeat)
        ta, tt = timings["argus"], timings["torch"]
        row = {"shape": list(shape), "candidate": best, "consts": manifest[best]["consts"], "argus_ms": ta.median,
               "argus_p10_p90": [ta.p10, ta.p90], "torch_ms": tt.median, "torch_p10_p90": [tt.p10, tt.p90],
               "argus_tflops": flops(shape) / (ta.median * 1e-3) / 1e12,
               "torch_tflops": flops(shape) / (tt.median * 1e-3) / 1e12, "ratio": tt.median / ta.median,
               "samples": ta.samples}
        results["benchmark"].append(row)
        print(f"bench {'x'.join(map(str, shape)):18s} argus {row['argus_tflops']:6.1f} TFLOP/s ({best}) torch "
              f"{row['torch_tflops']:6.1f} ratio {row['ratio']:.3f}", flush=True)
        save()
        sets = []
        torch.cuda.empty_cache()
    k_scaling(compiled, results, results["autotune"][str(SHAPES[0])]["best"])
    save()
    layouts(compiled, results, repeat)
    save()
    variants(compiled, results, good, repeat, tune_repeat)
    save()
    dependent(compiled, results, good, repeat)
    save()


def _versus(shape: tuple[int, int, int], timings: dict) -> dict:
    """A row of argus against torch at ``shape`` from :func:`benchmark`'s ``argus`` and ``torch``
    timings: medians, TFLOP/s and the ratio (torch / argus: above 1, argus is faster)."""
    ta, tt = timings["argus"], timings["torch"]
    flops = 2.0 * shape[0] * shape[1] * shape[2]
    return {"shape": list(shape), "argus_ms": ta.median, "torch_ms": tt.median,
            "argus_tflops": flops / (ta.median * 1e-3) / 1e12, "torch_tflops": flops / (tt.median * 1e-3) / 1e12,
            "ratio": tt.median / ta.median}


def variants(compiled: dict, results: dict, good: set, repeat: int, tune_repeat: int) -> None:
    """The fp16, bias + ReLU and fp32-C variants against their torch equivalent
    (:func:`_torch_gemm`: the matmul, then the epilogue's kernels and the conversion), at the
    large shapes: at each, the faster of the variant's 4096³ pick on 132 and on 128 persistent
    blocks (a short run; only keys the gate passed and whose checks passed), then that one and
    torch interleaved, L2 flushed, median of ``repeat``."""
    import torch

    from argus.runtime.timing import benchmark

    rows = []
    for variant in TIMED_VARIANTS:
        keys = [k for k in (f"{variant}_tuned", f"{variant}_tuned_sms128") if k in good
                and results["gate"][k].startswith("proved")]
        if not keys:
            continue
        for shape in VARIANT_SHAPES:
            sets = [_inputs(variant, shape, seed=41 + r) for r in range(2)]
            best = keys[0]
            if len(keys) > 1:
                t = benchmark({k: (lambda a, k=k, v=variant: _launch(compiled[k], v, a)) for k in keys},
                              lambda r, sets=sets: (sets[r],), rotations=2, warmup=2, repeat=tune_repeat)
                best = min(keys, key=lambda k: t[k].median)
            t = benchmark({"argus": lambda a, k=best, v=variant: _launch(compiled[k], v, a),
                           "torch": lambda a, v=variant: _torch_gemm(v, a)},
                          lambda r, sets=sets: (sets[r],), rotations=2, warmup=3, repeat=repeat)
            rows.append({"variant": variant, "candidate": best, **_versus(shape, t)})
            print(f"variant {variant:9s} {'x'.join(map(str, shape)):16s} argus {rows[-1]['argus_tflops']:6.1f} TFLOP/s "
                  f"({best}) torch {rows[-1]['torch_tflops']:6.1f} ratio {rows[-1]['ratio']:.3f}", flush=True)
            sets = []
            torch.cuda.empty_cache()
    results["variants"] = rows


def profile(directory: Path, key: str, shape: tuple[int, int, int], launches: int) -> None:
    """Launch one prepared specialization ``launches`` times (for a profiler attached from
    outside) and report the host-side time of a launch call."""
    import torch

    manifest = json.loads((directory / "manifest.json").read_text())
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    compiled, gate = _compiled(directory, key, manifest[key], sms)
    args = _inputs(manifest[key]["variant"], shape, seed=3)
    for _ in range(launches):
        _launch(compiled, manifest[key]["variant"], args)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        _launch(compiled, manifest[key]["variant"], args)
    host = (time.perf_counter() - start) / 20
    torch.cuda.synchronize()
    print(f"{key}: {gate}; host time per launch call {host * 1e6:.1f} us", flush=True)


def max_active_clusters(compiled) -> int:
    """``cuOccupancyMaxActiveClusters`` of a compiled cluster kernel: how many of its clusters the
    device holds at once (a persistent grid larger than that runs its last clusters late)."""
    import torch
    from cuda.bindings import driver

    from argus.runtime.launch import _function

    fn = _function(compiled.cubin.image, compiled.cubin.key, compiled.ptx.name, compiled.ptx.dynamic_shared_bytes)
    config = driver.CUlaunchConfig()
    cluster = compiled.kernel.launch.cluster
    config.gridDimX, config.gridDimY, config.gridDimZ = cluster[0] * 64, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = compiled.kernel.launch.threads, 1, 1
    config.sharedMemBytes = compiled.ptx.dynamic_shared_bytes
    config.hStream = driver.CUstream(torch.cuda.current_stream().cuda_stream)
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
    config.attrs = [attr]
    config.numAttrs = 1
    err, count = driver.cuOccupancyMaxActiveClusters(fn, config)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters: {err}")
    return int(count)


def sweep(directory: Path, out: Path, keys: list[str], shapes: list[tuple[int, int, int]], repeat: int,
          flush_mb: int | None = None) -> None:
    """Time prepared specializations (e.g. one candidate at several persistent grid sizes,
    ``prepare --grids``) against cuBLAS; for cluster candidates also report how many clusters
    the device holds at once.  Each key runs its own variant (inputs, output type, operand
    layouts); the baseline is ``torch.matmul`` on the same stored operands with the same
    epilogue and output type (:func:`_torch_gemm`)."""
    from argus.runtime.timing import benchmark

    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((directory / "manifest.json").read_text())
    from argus.runtime import launch

    encode = launch.encode_tensor_map
    rows = []
    for spelled in keys:
        # KEY@l2pN: the key's kernel launched with tensor maps of N-byte L2 promotion (128 otherwise)
        key, _, promotion = spelled.partition("@l2p")
        l2_promotion = int(promotion) if promotion else 128
        launch.encode_tensor_map = functools.partial(encode, l2_promotion=l2_promotion)
        sms = manifest[key]["sms"]
        compiled, gate = _compiled(directory, key, manifest[key], sms)
        variant = manifest[key].get("variant", "main")
        row = {"key": spelled, "variant": variant, "sms": sms, "consts": manifest[key]["consts"], "gate": gate,
               "l2_promotion": l2_promotion}
        if any(c > 1 for c in compiled.kernel.launch.cluster):
            row["max_active_clusters"] = max_active_clusters(compiled)
        check = _check(compiled, variant, ODD_SHAPES[3], seed=1)
        row["check_ok"] = check["ok"]
        for shape in shapes:
            sets = [_inputs(variant, shape, seed=21 + r) for r in range(2)]
            t = benchmark({"argus": lambda a, c=compiled, v=variant: _launch(c, v, a),
                           "torch": lambda a, v=variant: _torch_gemm(v, a)},
                          lambda r, sets=sets: (sets[r],), rotations=2, warmup=2, repeat=repeat,
                          l2_flush_bytes=flush_mb << 20 if flush_mb else None)
            row["x".join(map(str, shape))] = {"argus_ms": t["argus"].median, "torch_ms": t["torch"].median,
                                              "ratio": t["torch"].median / t["argus"].median}
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "sweep.json").write_text(json.dumps(rows, indent=1) + "\n")
    launch.encode_tensor_map = encode


def timeline(directory: Path, out: Path, keys: list[str], shape: tuple[int, int, int], launches: int) -> None:
    """Launch ``stamps`` diagnostics (``ptx-variants --schedules stamps``) at ``shape`` and report,
    per key, where a k-block's time goes (cycles of the block's SM, medians and tails over every
    block and k-block, the first k-blocks of each block left out): how long after the later
    consumer warpgroup released a stage the producer's wait for it ended (``wake``); from then
    until the stage's ``full`` barrier completed (``load``: the TMA latency of the stage's boxes);
    the sum (``refill``); how long before (negative: after) the first warpgroup started to wait
    for it the stage was full (``slack``); each warpgroup's wait (``stall``) and the period of its
    k-blocks.  The stamps of the last launch are saved raw (``timeline_<key>.npy``)."""
    import numpy as np
    import torch
    from cuda.bindings import driver

    from argus.runtime import launch

    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((directory / "manifest.json").read_text())
    report = {"shape": list(shape), "launches": launches, "slots": list(STAMP_SLOTS), "keys": {}}
    for key in keys:
        entry = manifest[key]
        if "stamps of each" not in entry.get("ptx_patch", ""):
            raise SystemExit(f"{key}: not a stamps diagnostic (build it with ptx-variants --schedules stamps "
                             "or estamps)")
        compiled, _ = _compiled(directory, key, entry, entry["sms"])
        variant = entry["variant"]
        args = _inputs(variant, shape, seed=5)
        _launch(compiled, variant, args)
        torch.cuda.synchronize()
        module = launch._modules[(int(launch._current_context()), compiled.cubin.key)][0]
        found = {}
        for name in ("argus_stamps", "argus_estamps"):
            err, pointer, size = driver.cuModuleGetGlobal(module, name.encode())
            if err == driver.CUresult.CUDA_SUCCESS:
                found[name] = (pointer, size)
        for _ in range(launches):
            for pointer, size in found.values():
                launch._check(driver.cuMemsetD8(pointer, 0, size), "cuMemsetD8")
            _launch(compiled, variant, args)
            torch.cuda.synchronize()
        got = {}
        for name, (pointer, size) in found.items():
            got[name] = np.zeros(size // 8, dtype=np.int64)
            launch._check(driver.cuMemcpyDtoH(got[name].ctypes.data, pointer, size), "cuMemcpyDtoH")
        summary = {"check_ok": _check(compiled, variant, shape, seed=5)["ok"]}
        if "argus_stamps" in got:
            stamps = got["argus_stamps"].reshape(-1, STAMP_CAP, len(STAMP_SLOTS))[:entry["sms"]]
            np.save(out / f"timeline_{key}.npy", stamps)
            nk = -(-shape[2] // int(entry["consts"].get("BK", 64)))
            summary.update(_timeline_summary(stamps, int(entry["consts"]["STAGES"]), nk=nk))
        if "argus_estamps" in got:
            stamps = got["argus_estamps"].reshape(-1, ESTAMP_TILES, 2, ESTAMP_SLOTS)[:entry["sms"]]
            np.save(out / f"epilogue_{key}.npy", stamps)
            summary["epilogue"] = _epilogue_summary(stamps)
        report["keys"][key] = summary
        print(key, json.dumps(report["keys"][key]), flush=True)
        (out / "timeline.json").write_text(json.dumps(report, indent=1) + "\n")


def _epilogue_summary(stamps) -> dict:
    """Per consumer warpgroup, the median cycles from a tile's drain to each later epilogue stamp
    (see :func:`_epilogue_stamped`), over every block and tile that recorded them."""
    import numpy as np

    out = {}
    for wg in range(stamps.shape[2]):
        rows = stamps[:, :, wg, :].reshape(-1, stamps.shape[3])
        rows = rows[(rows[:, 0] > 0) & (rows[:, -1] > 0)]
        steps = {}
        for slot in range(1, stamps.shape[3]):
            have = rows[:, slot] > 0
            if have.any():
                steps["end" if slot == stamps.shape[3] - 1 else str(slot)] = float(
                    np.median(rows[have, slot] - rows[have, 0]))
        out[f"wg{wg}"] = {"tiles": len(rows), "from_drain": steps}
    return out


def _timeline_summary(stamps, stages: int, skip: int = 8, nk: int | None = None) -> dict:
    """Distributions (cycles) of the ``stamps`` of every block (see :func:`timeline`); with the
    tile's k-block count ``nk``, also the tile transition: from the later warpgroup's release of
    a tile's last k-block to the earlier one's wait for the next tile's first (the epilogue and
    the next tile's start)."""
    import numpy as np

    wake, arrived, probe, got, released = (stamps[:, :, 0], stamps[:, :, 1], stamps[:, :, 2:4], stamps[:, :, 4:6],
                                           stamps[:, :, 6:8])
    valid = (wake > 0) & (arrived > 0) & (probe > 0).all(-1) & (got > 0).all(-1) & (released > 0).all(-1)
    valid[:, :skip] = False
    freed = released.max(-1)  # the stage is empty once the later warpgroup arrived
    later = np.zeros_like(valid)
    later[:, stages:] = valid[:, stages:] & valid[:, :-stages]
    refill_from = np.zeros_like(freed)
    refill_from[:, stages:] = freed[:, :-stages]
    first = probe.min(-1)
    nxt = np.zeros_like(valid)
    nxt[:, :-1] = valid[:, :-1] & valid[:, 1:]

    def dist(values) -> dict:
        v = np.asarray(values, dtype=np.float64).ravel()
        if v.size == 0:
            return {"n": 0}
        q = np.percentile(v, [10, 50, 90, 99])
        return {"n": int(v.size), "mean": round(float(v.mean()), 1), "p10": float(q[0]), "p50": float(q[1]),
                "p90": float(q[2]), "p99": float(q[3])}

    stall = (got - probe)[valid]
    period = (probe[:, 1:] - probe[:, :-1])[nxt[:, :-1]]
    return {
        "k_blocks": int(valid.sum()),
        "wake": dist((wake - refill_from)[later]),
        "load": dist((arrived - wake)[valid]),
        "refill": dist((arrived - refill_from)[later]),
        "slack": dist((first - arrived)[valid]),
        "late_fraction": round(float((arrived > first)[valid].mean()), 4),
        "stall": dist(stall),
        "stall_per_k_block": round(float(stall.sum() / max(1, valid.sum())), 1),
        "period": dist(period),
        **({"transition": dist([first[b, it] - freed[b, it - 1] for b in range(stamps.shape[0])
                                for it in range(nk, stamps.shape[1], nk)
                                if (stamps[b, it] > 0).all() and (stamps[b, it - 1] > 0).all()])} if nk else {}),
    }


def layouts(compiled: dict, results: dict, repeat: int, shapes: tuple = ((4096, 4096, 4096), (8192, 8192, 8192))) -> None:
    """Each operand layout's default candidate against ``torch.matmul`` on the same stored
    operands (``a``, ``a.t()``, ``b``, ``b.t()`` views), beside the K-major one."""
    import torch

    from argus.runtime.timing import benchmark

    rows = []
    for variant in ("main", *(v for v in VARIANTS if _majors(v) != ("k", "k"))):
        key = _default_key() if variant == "main" else f"{variant}_tuned"
        if key not in compiled:
            continue
        for shape in shapes:
            sets = [_inputs(variant, shape, seed=31 + r) for r in range(2)]
            t = benchmark({"argus": lambda a, key=key, variant=variant: _launch(compiled[key], variant, a),
                           "torch": lambda a, variant=variant: torch.matmul(*_matmul_operands(variant, a))},
                          lambda r, sets=sets: (sets[r],), rotations=2, warmup=2, repeat=repeat)
            rows.append({"variant": variant, "majors": _majors(variant), **_versus(shape, t)})
            print(f"layout {variant:8s} {'x'.join(map(str, shape)):16s} argus {rows[-1]['argus_tflops']:6.1f} TFLOP/s "
                  f"torch {rows[-1]['torch_tflops']:6.1f} ratio {rows[-1]['ratio']:.3f}", flush=True)
            sets = []
            torch.cuda.empty_cache()
    results["layouts"] = rows


def k_scaling(compiled: dict, results: dict, key: str, ks: tuple[int, ...] = (1024, 4096, 16384)) -> None:
    """Time one candidate at 4096 x 4096 x K for several K: the time per tile is
    ``overhead + K * rate``, which separates the per-tile cost (epilogue, pipeline fill and
    drain, scheduling) from the main loop's rate."""
    import torch

    from argus.runtime.timing import benchmark

    rows = []
    for k in ks:
        shape = (4096, 4096, k)
        sets = [_inputs("main", shape, seed=5 + r) for r in range(2)]
        t = benchmark({"argus": lambda a: _launch(compiled[key], "main", a),
                       "torch": lambda a: torch.matmul(a["a"], a["b"].t())},
                      lambda r, sets=sets: (sets[r],), rotations=2, warmup=2, repeat=20)
        rows.append({"k": k, "argus_ms": t["argus"].median, "torch_ms": t["torch"].median})
        print(f"k-scaling {key} K={k}: argus {t['argus'].median:.4f} ms torch {t['torch'].median:.4f} ms", flush=True)
    fixed, tflops = _k_fit(rows, "argus_ms")
    torch_fixed, torch_tflops = _k_fit(rows, "torch_ms")
    results["k_scaling"] = {"candidate": key, "rows": rows, "fixed_ms": fixed, "main_loop_tflops": tflops,
                            "torch_fixed_ms": torch_fixed, "torch_main_loop_tflops": torch_tflops}
    print(f"k-scaling fit: argus {fixed:.4f} ms + main loop {tflops:.1f} TFLOP/s, torch {torch_fixed:.4f} ms + "
          f"{torch_tflops:.1f} TFLOP/s", flush=True)


def _round_times(rounds: dict, launches: int, repeat: int, host: dict | None = None) -> dict[str, float]:
    """Per-call milliseconds of each ``round`` (name -> a callable issuing ``launches`` calls),
    timed between two events; median over ``repeat`` rounds, the names interleaved round by round.
    ``host``, if given, receives each name's median host time per call (µs) to issue its calls:
    where that exceeds the kernel's time, back-to-back calls wait on the host."""
    import statistics
    import time

    import torch

    torch.cuda.synchronize()
    events: dict[str, list] = {name: [] for name in rounds}
    issued: dict[str, list] = {name: [] for name in rounds}
    for _ in range(repeat):
        for name, issue in rounds.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            t0 = time.perf_counter()
            issue()
            issued[name].append(time.perf_counter() - t0)
            end.record()
            events[name].append((start, end))
    torch.cuda.synchronize()
    if host is not None:
        host.update({name: statistics.median(t) / launches * 1e6 for name, t in issued.items()})
    return {name: statistics.median(s.elapsed_time(e) for s, e in pairs) / launches for name, pairs in events.items()}


def _issue(fn, inputs: list, launches: int) -> None:
    for i in range(launches):
        fn(inputs[i % len(inputs)])


def _chain_times(calls: dict, launches: int, repeat: int, host: dict | None = None) -> dict[str, float]:
    """Per-call milliseconds of ``launches`` back-to-back calls of each ``fn`` on its rotating
    ``inputs`` (``calls``: name -> (fn, inputs)), no flush and no event between them; median over
    ``repeat`` rounds, the names interleaved round by round (``host``: see :func:`_round_times`)."""
    for fn, inputs in calls.values():  # warm-up
        _issue(fn, inputs, launches)
    return _round_times({name: functools.partial(_issue, fn, inputs, launches) for name, (fn, inputs) in calls.items()},
                        launches, repeat, host)


def _graph_times(calls: dict, launches: int, repeat: int) -> dict:
    """As :func:`_chain_times`, with each name's ``launches`` calls captured once into a CUDA graph
    and the graph replayed: no host time between the kernels, as in a captured forward pass (a
    kernel that waits on the grid dependency keeps its programmatic edge in the graph).  A name
    whose capture fails is left out; its error is under ``"errors"`` of the result."""
    import torch

    graphs, errors = {}, {}
    for name, (fn, inputs) in calls.items():
        try:
            _issue(fn, inputs, launches)  # the launch's argument checks and caches, outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                _issue(fn, inputs, launches)
            graph.replay()
            torch.cuda.synchronize()
            graphs[name] = graph
        except Exception as error:  # reported next to the numbers
            errors[name] = f"{type(error).__name__}: {error}"
    out: dict = _round_times({name: graph.replay for name, graph in graphs.items()}, launches, repeat)
    if errors:
        out["errors"] = errors
    return out


def chain(directory: Path, out: Path, keys: list[str], shapes: list[tuple[int, int, int]], launches: int,
          repeat: int) -> None:
    """Back-to-back GEMMs, as in a model's forward pass: ``launches`` calls on rotating inputs with
    no L2 flush and no event between them, timed as one and divided by ``launches``; median over
    ``repeat`` rounds, keys and ``torch.matmul`` interleaved round by round.  What a dependent
    launch (``PDL=True``) is for: each kernel's setup overlaps the end of the one before it.  The
    same calls are timed again as a replayed CUDA graph (:func:`_graph_times`), without the host's
    launch time between them."""
    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((directory / "manifest.json").read_text())
    compiled = {}
    for key in keys:
        compiled[key], gate = _compiled(directory, key, manifest[key], manifest[key]["sms"])
        variant = manifest[key].get("variant", "main")
        ok = _check(compiled[key], variant, ODD_SHAPES[3], seed=1)["ok"]
        print(f"{key}: {gate}; dependent launch {compiled[key].ptx.dependent_launch}; check {ok}", flush=True)
    variants = {key: manifest[key].get("variant", "main") for key in keys}
    rows = []
    for shape in shapes:
        sets = {v: [_inputs(v, shape, seed=31 + r) for r in range(4)] for v in set(variants.values())}
        torch_variant = variants[keys[0]]
        calls = {key: (lambda a, c=compiled[key], v=variants[key]: _launch(c, v, a), sets[variants[key]])
                 for key in keys}
        calls["torch"] = (lambda a, v=torch_variant: _torch_gemm(v, a), sets[torch_variant])
        host: dict[str, float] = {}
        per_call = _chain_times(calls, launches, repeat, host)
        graphed = _graph_times(calls, launches, repeat)
        flops = 2 * shape[0] * shape[1] * shape[2]
        row = {"shape": "x".join(map(str, shape)), "launches": launches, "repeat": repeat,
               **{f"{name}_ms": t for name, t in per_call.items()},
               **{f"{key}_ratio": per_call["torch"] / per_call[key] for key in keys},
               "host_us": host, "graph": graphed}
        rows.append(row)
        print(f"chain {row['shape']} x{launches}: torch {per_call['torch']:.4f} ms "
              f"({flops / per_call['torch'] / 1e9:.1f} TFLOP/s); "
              + "; ".join(f"{key} {per_call[key]:.4f} ms ratio {row[key + '_ratio']:.3f}" for key in keys), flush=True)
        print(f"host {row['shape']}: µs per call to issue: " + "; ".join(f"{name} {t:.1f}" for name, t in host.items()),
              flush=True)
        if "torch" in graphed:
            print(f"graph {row['shape']} x{launches}: torch {graphed['torch']:.4f} ms; "
                  + "; ".join(f"{key} {graphed[key]:.4f} ms ratio {graphed['torch'] / graphed[key]:.3f}"
                              for key in keys if key in graphed), flush=True)
        if "errors" in graphed:
            print(f"graph capture failed: {graphed['errors']}", flush=True)
    (out / "chain.json").write_text(json.dumps(rows, indent=1) + "\n")


def dependent(compiled: dict, results: dict, good: set, repeat: int) -> None:
    """Step 6 of ``run``: each pick (``PDL=True``) against its serialized twin (``<key>_serial``, ``PDL=False``)
    and ``torch.matmul``, at the shapes the pick was tuned at: behind the L2 flush as in step 3
    (an event between the flush and the GEMM), back to back (20 calls timed as one, no flush, no
    event between them: :func:`_chain_times`) and as a replayed CUDA graph (:func:`_graph_times`)."""
    import torch

    from argus.runtime.timing import benchmark

    rows = []
    for shape in ((4096, 4096, 4096), (2048, 2048, 2048), (128, 14336, 4096)):
        best = results["autotune"].get(str(shape), {}).get("best")
        twin = f"{best}_serial"
        if best is None or twin not in good or not results["gate"].get(twin, "").startswith("proved"):
            continue
        sets = [_inputs("main", shape, seed=41 + r) for r in range(4)]
        fns = {best: lambda a, k=best: _launch(compiled[k], "main", a),
               twin: lambda a, k=twin: _launch(compiled[k], "main", a),
               "torch": lambda a: torch.matmul(a["a"], a["b"].t())}
        flushed = benchmark(fns, lambda r, sets=sets: (sets[r],), rotations=4, warmup=3, repeat=repeat)
        chained = _chain_times({name: (fn, sets) for name, fn in fns.items()}, 20, max(repeat // 2, 10))
        graphed = _graph_times({name: (fn, sets) for name, fn in fns.items()}, 20, max(repeat // 2, 10))
        row = {"shape": list(shape), "key": best, "twin": twin,
               "flushed_ms": {k: t.median for k, t in flushed.items()}, "chained_ms": chained, "graph_ms": graphed}
        rows.append(row)
        in_graph = ("; graph: " + " ".join(f"{k} {graphed['torch'] / graphed[k]:.3f}" for k in (best, twin) if k in graphed)
                    if "torch" in graphed else "")
        print(f"dependent {'x'.join(map(str, shape)):18s} flushed: {best} {flushed['torch'].median / flushed[best].median:.3f} "
              f"{twin} {flushed['torch'].median / flushed[twin].median:.3f}; back to back: "
              f"{best} {chained['torch'] / chained[best]:.3f} {twin} {chained['torch'] / chained[twin]:.3f}"
              f"{in_graph} (ratios torch / argus)", flush=True)
        sets = []
        torch.cuda.empty_cache()
    results["dependent"] = rows


def api(out: Path, shapes: list[tuple[int, int, int]], repeat: int) -> None:
    """``argus.kernels.matmul.matmul`` as a user calls it (operand layouts read from strides,
    the specialization from ``tuned_config`` or ``autotune=True``, compiled through the gate from
    the proof records, the call's own Python work included) against ``torch.matmul`` on the same
    operands, interleaved, L2 flushed, median of ``repeat``; and ``linear`` with bias and ReLU
    against ``relu(F.linear)`` on a (4, 2048, 4096) activation and a 14336 x 4096 weight."""
    import torch

    from argus.kernels.matmul import linear, matmul
    from argus.runtime.timing import benchmark

    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ARGUS_CACHE_DIR", "/tmp/argus-cache")
    rows = []
    for shape in shapes:
        m, n, k = shape
        sets = []
        for r in range(2):
            g = torch.Generator(device="cuda").manual_seed(71 + r)
            a = torch.randn(m, k, device="cuda", generator=g).to(torch.bfloat16)
            b = torch.randn(n, k, device="cuda", generator=g).to(torch.bfloat16).t()  # K x N, read K-major
            sets.append((a, b))
        ok = _api_close(matmul(*sets[0], autotune=True), *sets[0])  # autotunes, then checks its pick
        t = benchmark({"argus": lambda a, b: matmul(a, b), "argus_autotuned": lambda a, b: matmul(a, b, autotune=True),
                       "torch": torch.matmul}, lambda r, sets=sets: sets[r], rotations=2, warmup=3, repeat=repeat)
        row = {**_versus(shape, t), "check": ok, "autotuned_ms": t["argus_autotuned"].median,
               "autotuned_ratio": t["torch"].median / t["argus_autotuned"].median}
        rows.append(row)
        print(f"api matmul {'x'.join(map(str, shape)):16s} default {row['ratio']:.3f} autotuned "
              f"{row['autotuned_ratio']:.3f} (torch {row['torch_tflops']:.1f} TFLOP/s) check {ok}", flush=True)
    x = torch.randn(4, 2048, 4096, device="cuda").to(torch.bfloat16)
    w = torch.randn(14336, 4096, device="cuda").to(torch.bfloat16)
    bias = torch.randn(14336, device="cuda").to(torch.bfloat16)
    ok = _api_close(linear(x, w, bias, activation="relu").view(-1, 14336), x.view(-1, 4096), w.t(), bias, relu=True)
    t = benchmark({"argus": lambda: linear(x, w, bias, activation="relu"),
                   "torch": lambda: torch.relu(torch.nn.functional.linear(x, w, bias))},
                  lambda r: (), rotations=1, warmup=3, repeat=repeat)
    row = {**_versus((8192, 14336, 4096), t), "check": ok, "what": "linear (4, 2048, 4096) x (14336, 4096) + bias, ReLU"}
    rows.append(row)
    print(f"api linear 4x2048x4096 @ 14336x4096 + bias, ReLU: ratio {row['ratio']:.3f} (torch {row['torch_tflops']:.1f} "
          f"TFLOP/s) check {ok}", flush=True)
    (out / "api.json").write_text(json.dumps(_envelope({"api": rows}), indent=1) + "\n")


def _api_close(result, a, b, bias=None, relu: bool = False) -> bool:
    import torch

    ref = a.double() @ b.double()
    if bias is not None:
        ref = ref + bias.double()
    if relu:
        ref = torch.relu(ref)
    return bool(_relative_error(result, ref) <= TOLERANCE["bf16"] and not result.isnan().any().item())


def _k_fit(rows: list[dict], column: str) -> tuple[float, float]:
    """(fixed ms, main-loop TFLOP/s) of the line through the first and last K of 4096 x 4096 x K:
    the time is ``fixed + K · 2 · 4096² / rate``."""
    (k0, t0), (k1, t1) = (rows[0]["k"], rows[0][column]), (rows[-1]["k"], rows[-1][column])
    per_k = (t1 - t0) / (k1 - k0)
    return t0 - per_k * k0, 2 * 4096 * 4096 / (per_k * 1e-3) / 1e12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("directory", type=Path)
    p.add_argument("--only", nargs="*", default=[])
    p.add_argument("--grids", type=int, nargs="*", default=[],
                   help="also build every specialization for these persistent grid sizes (keys KEY_smsN)")
    p.add_argument("--extra", nargs="*", default=[],
                   help="ad-hoc specializations for sweep: KEY[:VARIANT]=JSON, the consts over the 4096³ pick's")
    r = sub.add_parser("run")
    r.add_argument("directory", type=Path)
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gemm_out")))
    r.add_argument("--repeat", type=int, default=50, help="timed runs per candidate (>= 50 for RESULTS.md)")
    r.add_argument("--tune-repeat", type=int, default=10)
    r.add_argument("--no-tune", action="store_true")
    f = sub.add_parser("profile")
    f.add_argument("directory", type=Path)
    f.add_argument("key")
    f.add_argument("--shape", type=int, nargs=3, default=[4096, 4096, 4096])
    f.add_argument("--launches", type=int, default=2)
    v = sub.add_parser("ptx-variants", help="PTX-level experiments on a prepared key (L2 prefetch and policies: "
                                            "K-major keys; fewer release arrivals)")
    v.add_argument("directory", type=Path)
    v.add_argument("base", help="a prepared key, e.g. main_c1")
    v.add_argument("--prefetch", type=int, nargs="*", default=[4, 8, 16], help="k-blocks ahead")
    v.add_argument("--policies", nargs="*", default=["evict_last_evict_first", "evict_last_evict_last"],
                   help="<A's policy>_<B's policy>")
    v.add_argument("--releases", nargs="*", default=[], choices=_RELEASES,
                   help="one empty-barrier arrival per warp / warpgroup (spread: local and remote from two warps; "
                        "elect: per warp, by elect.sync)")
    v.add_argument("--schedules", nargs="*", default=[],
                   help=f"the consumer's k-block loop rescheduled, or diagnostics: {', '.join(SCHEDULES)} "
                        "(a+b: both)")
    w = sub.add_parser("sweep")
    w.add_argument("directory", type=Path)
    w.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gemm_out")))
    w.add_argument("--keys", nargs="+", required=True)
    w.add_argument("--shapes", nargs="+", default=["4096x4096x4096", "8192x8192x8192"])
    w.add_argument("--repeat", type=int, default=20)
    w.add_argument("--flush-mb", type=int, default=None, help="L2 flush buffer size (default: the harness's)")
    ch = sub.add_parser("chain", help="back-to-back GEMMs without flushes or events between them (dependent launches)")
    ch.add_argument("directory", type=Path)
    ch.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gemm_out")))
    ch.add_argument("--keys", nargs="+", required=True)
    ch.add_argument("--shapes", nargs="+", default=["4096x4096x4096"])
    ch.add_argument("--launches", type=int, default=20)
    ch.add_argument("--repeat", type=int, default=20)
    t = sub.add_parser("timeline", help="where a k-block's time goes: launch stamps diagnostics (ptx-variants "
                                        "--schedules stamps) and summarize their clock stamps")
    t.add_argument("directory", type=Path)
    t.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gemm_out")))
    t.add_argument("--keys", nargs="+", required=True)
    t.add_argument("--shape", default="4096x4096x4096")
    t.add_argument("--launches", type=int, default=3)
    ap = sub.add_parser("api", help="argus.kernels.matmul / linear as a user calls them, against torch")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gemm_out")))
    ap.add_argument("--shapes", nargs="+", default=["4096x4096x4096", "2048x2048x2048", "128x14336x4096"])
    ap.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    if args.command == "api":
        api(args.out, [tuple(int(v) for v in s.split("x")) for s in args.shapes], args.repeat)
    elif args.command == "chain":
        chain(args.directory, args.out, args.keys, [tuple(int(v) for v in s.split("x")) for s in args.shapes],
              args.launches, args.repeat)
    elif args.command == "timeline":
        timeline(args.directory, args.out, args.keys, tuple(int(v) for v in args.shape.split("x")), args.launches)
    elif args.command == "sweep":
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes]
        sweep(args.directory, args.out, args.keys, shapes, args.repeat, args.flush_mb)
    elif args.command == "profile":
        profile(args.directory, args.key, tuple(args.shape), args.launches)
    elif args.command == "prepare":
        prepare(args.directory, args.only, args.grids, args.extra)
    elif args.command == "ptx-variants":
        ptx_variants(args.directory, args.base, args.prefetch, args.policies, args.releases, args.schedules)
    else:
        run(args.directory, args.out, args.repeat, args.tune_repeat, args.no_tune)


if __name__ == "__main__":
    main()
