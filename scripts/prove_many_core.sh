#!/usr/bin/env bash
# Prove GEMM specializations on a many-core machine that has no z3 installed.
#
#   scripts/prove_many_core.sh SECONDS OUT KEY...
#
# Expects, in the working tree: a z3-solver wheel for the machine's Python under .whl/ and
# (optionally) a VC cache packed as build/vcc.tar.xz (tar cJf build/vcc.tar.xz -C CACHE .).
# SECONDS is the whole run, set-up and packing included, so that the script ends inside the
# limit of the call that runs it: benchmarks/prove_gemm.py runs on KEY... under `timeout`, which
# stops the whole process group (jobs, lanes, z3 children) and nothing else, until PACK_S (30)
# seconds before the end; then the grown cache and any proof records are packed into OUT
# (vcc.tar.xz, rec.tar.xz) with the log.
# Environment: PACK_S (30); JOBS (6), LANES (2), BUDGET (60), RETRY_BUDGET (300) and RETRIES (2),
# passed on as prove_gemm.py's --jobs, --lanes, --budget, --retry-budget, --retries.
set -u
secs=$1; out=$2; shift 2
end=$(( $(date +%s) + secs ))
jobs=${JOBS:-6}; lanes=${LANES:-2}
site=/tmp/argus-site; cache=/tmp/argus-vcc; rec=/tmp/argus-rec
mkdir -p "$site" "$cache" "$rec" "$out"
python3 -m pip install -q --no-deps --target "$site" .whl/z3_solver-*.whl >"$out/pip.txt" 2>&1
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ -f build/vcc.tar.xz ] && tar xJf build/vcc.tar.xz -C "$cache"
echo "cores: $(nproc)  jobs: $jobs  lanes: $lanes  keys: $*" >"$out/log.txt"
start=$(date +%s)
left=$(( end - start - ${PACK_S:-30} - 10 ))
if [ "$left" -lt 1 ]; then echo "no time left to prove after set-up" >>"$out/log.txt"; left=1; fi
timeout -k 10 "$left" python3 benchmarks/prove_gemm.py --only "$@" --jobs "$jobs" --lanes "$lanes" \
    --cache "$cache" --budget "${BUDGET:-60}" --retry-budget "${RETRY_BUDGET:-300}" --retries "${RETRIES:-2}" \
    --records "$rec" >>"$out/log.txt" 2>"$out/err.txt"
echo "rc $? after $(( $(date +%s) - start )) s" >>"$out/log.txt"
tar cJf "$out/vcc.tar.xz" -C "$cache" .
tar cJf "$out/rec.tar.xz" -C "$rec" .
ls "$rec" >>"$out/log.txt"
