#!/bin/bash
# The pending GEMM measurements, in one or two GPU calls, written under $OUT (default ./gpu_round):
#   1. the gated benchmark (`benchmarks/gemm.py run`: every key from its proof record, float64
#      checks, autotuner, all shapes, layouts, types, epilogues, dependent launch, K fit);
#   2. a sweep of the 4096³ / 8192³ picks (median of 50, interleaved with torch.matmul);
#   3. the host's launch path, A/B within the call: `chain` with the kept launch, then with
#      benchmarks/experiments/launch_per_call_config.patch applied (a configuration built per
#      call), then the kept launch again;
#   4. the GPU tests of argus.kernels.matmul;
#   5. matmul / linear as a user calls them against torch (`benchmarks/gemm.py api`).
# Prepared on a machine with the solvers and ptxas, carried to the GPU machine:
#   python benchmarks/gemm.py prepare build/gemm
#   mkdir -p build/ptxz && xz -T2 -6 -c "$(python -c 'import argus.toolchain as t; print(t.find_ptxas())')" \
#       > build/ptxz/ptxas.xz      # or any ptxas that assembles sm_90a, xz-compressed
# On the GPU machine, from the repository root:
#   bash benchmarks/gpu_round.sh        # MODE=full (default): steps 1-3, about 9 minutes
#   MODE=ab bash benchmarks/gpu_round.sh    # step 3 alone, about 4 minutes
#   MODE=tests bash benchmarks/gpu_round.sh # steps 4 and 5, about 6 minutes
set -u
OUT=${OUT:-gpu_round}
mkdir -p "$OUT"
if [ -f build/ptxz/ptxas.xz ] && [ -z "${ARGUS_PTXAS:-}" ]; then
    mkdir -p /tmp/argus-ptxas && xz -dc build/ptxz/ptxas.xz > /tmp/argus-ptxas/ptxas && chmod +x /tmp/argus-ptxas/ptxas
    export ARGUS_PTXAS=/tmp/argus-ptxas/ptxas
fi
G="python3 benchmarks/gemm.py"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv | tee "$OUT/gpu.txt"
date -u
MODE=${MODE:-full}
if [ "$MODE" = full ]; then
    timeout "${RUN_S:-240}" $G run build/gemm --out "$OUT/run" > "$OUT/run.log" 2>&1; echo "run rc $?"
    grep -E "FAIL|^tune|^bench|dependent|fit" "$OUT/run.log" | head -80
    echo "float64 checks ok: $(grep -c ' ok rel' "$OUT/run.log")"
    timeout 80 $G sweep build/gemm --out "$OUT/sweep" --keys main_c3_sms128 main_c1_sms128 main_c3 main_c3_sms128 \
        --shapes 4096x4096x4096 8192x8192x8192 --repeat 50 > "$OUT/sweep.log" 2>&1; echo "sweep rc $?"
    tail -12 "$OUT/sweep.log"
fi
if [ "$MODE" = full ] || [ "$MODE" = ab ]; then
    K="main_c3_sms128 main_c3_sms128_serial"
    S="2048x2048x2048 4096x4096x1024 1024x1024x1024"
    P=benchmarks/experiments/launch_per_call_config.patch
    timeout 75 $G chain build/gemm --out "$OUT/kept1" --keys $K --shapes $S > "$OUT/kept1.log" 2>&1
    if git apply "$P" 2>/dev/null || patch -s -p1 < "$P"; then
        timeout 75 $G chain build/gemm --out "$OUT/per_call" --keys $K --shapes $S > "$OUT/per_call.log" 2>&1
        git apply -R "$P" 2>/dev/null || patch -s -R -p1 < "$P"
    fi
    timeout 75 $G chain build/gemm --out "$OUT/kept2" --keys $K --shapes $S > "$OUT/kept2.log" 2>&1
    grep -E "^chain|^host|^graph" "$OUT"/kept1.log "$OUT"/per_call.log "$OUT"/kept2.log
fi
if [ "$MODE" = tests ]; then
    timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_matmul_gpu.py > "$OUT/matmul_tests.log" 2>&1
    echo "matmul gpu tests rc $?"; tail -3 "$OUT/matmul_tests.log"
    timeout 150 $G api --out "$OUT/api" > "$OUT/api.log" 2>&1; echo "api rc $?"
    grep "^api" "$OUT/api.log"
fi
date -u
