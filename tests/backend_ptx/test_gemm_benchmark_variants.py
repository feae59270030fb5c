"""``benchmarks/gemm.py run``, step 5: the fp16, bias + ReLU and fp32-C variants timed against
their torch equivalent, each at the faster of its 4096³ pick on 132 and on 128 persistent blocks
— only keys the gate passed and whose correctness checks passed may be timed."""

import sys
import types

import pytest


class _Timing:
    def __init__(self, median):
        self.median = median


@pytest.fixture
def bench(monkeypatch, gemm_benchmark):
    """The benchmark module with the GPU replaced: each candidate's median is read from
    ``bench.MEDIANS`` (key, or ``torch``), so the step's choices can be checked."""
    import argus.runtime.timing as timing

    module = gemm_benchmark
    module.MEDIANS = {}
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=types.SimpleNamespace(empty_cache=lambda: None)))
    monkeypatch.setattr(module, "_inputs", lambda variant, shape, seed: {"variant": variant, "shape": shape})
    monkeypatch.setattr(module, "_launch", lambda compiled, variant, args: compiled)
    monkeypatch.setattr(module, "_torch_gemm", lambda variant, args: "torch")

    def benchmark(fns, make_inputs, **kwargs):
        args = make_inputs(0)[0]
        return {name: _Timing(module.MEDIANS[fn(args)]) for name, fn in fns.items()}

    monkeypatch.setattr(timing, "benchmark", benchmark)
    return module


def test_each_variant_is_timed_at_its_faster_grid(bench):
    keys = [f"{v}_tuned{g}" for v in bench.TIMED_VARIANTS for g in ("", "_sms128")]
    compiled = {k: k for k in keys}
    gate = {k: "proved (proof record); argus.compile" for k in keys}
    bench.MEDIANS = {"torch": 1.0, "f16_tuned": 1.01, "f16_tuned_sms128": 0.99, "bias_relu_tuned": 0.80,
                     "bias_relu_tuned_sms128": 0.90, "f32_out_tuned": 0.85, "f32_out_tuned_sms128": 0.84}
    results = {"gate": gate}
    bench.variants(compiled, results, set(keys), repeat=50, tune_repeat=10)
    rows = results["variants"]
    assert [(r["variant"], tuple(r["shape"])) for r in rows] == \
        [(v, s) for v in bench.TIMED_VARIANTS for s in bench.VARIANT_SHAPES]
    picks = {r["variant"]: r["candidate"] for r in rows}
    assert picks == {"f16": "f16_tuned_sms128", "bias_relu": "bias_relu_tuned", "f32_out": "f32_out_tuned_sms128"}
    f16 = rows[0]
    assert f16["ratio"] == pytest.approx(1.0 / 0.99)
    m, n, k = f16["shape"]
    assert f16["argus_tflops"] == pytest.approx(2.0 * m * n * k / (0.99e-3) / 1e12)


def test_refused_and_failing_keys_are_never_timed(bench):
    keys = [f"{v}_tuned{g}" for v in bench.TIMED_VARIANTS for g in ("", "_sms128")]
    compiled = {k: k for k in keys}
    gate = {k: "proved (proof record); argus.compile" for k in keys}
    gate["f16_tuned_sms128"] = "gate: refused (no matching proof record), timed through the backend API"
    good = set(keys) - {"bias_relu_tuned"}  # its correctness check failed
    good -= {"f32_out_tuned", "f32_out_tuned_sms128"}  # both failed: the variant is not timed
    bench.MEDIANS = {"torch": 1.0, "f16_tuned": 1.1, "f16_tuned_sms128": 0.5, "bias_relu_tuned": 0.5,
                     "bias_relu_tuned_sms128": 1.2}
    results = {"gate": gate}
    bench.variants(compiled, results, good, repeat=50, tune_repeat=10)
    picks = {(r["variant"], r["candidate"]) for r in results["variants"]}
    assert picks == {("f16", "f16_tuned"), ("bias_relu", "bias_relu_tuned_sms128")}


def test_the_variants_fixed_grid_keys_are_prepared(gemm_benchmark):
    bench = gemm_benchmark
    fixed = {key: consts for key, _, consts in bench._specializations() if "SMS" in consts}
    for variant in bench.TIMED_VARIANTS:
        tuned = next(consts for key, _, consts in bench._specializations() if key == f"{variant}_tuned")
        assert fixed[f"{variant}_tuned_sms128"] == {**tuned, "SMS": 128}


def test_the_k_scaling_fit_separates_the_fixed_cost_from_the_main_loop(gemm_benchmark):
    bench = gemm_benchmark
    rate = 800e12  # FLOP/s of the main loop
    rows = [{"k": k, "argus_ms": 0.012 + 2 * 4096 * 4096 * k / rate * 1e3,
             "torch_ms": 0.010 + 2 * 4096 * 4096 * k / (2 * rate) * 1e3} for k in (1024, 4096, 16384)]
    fixed, tflops = bench._k_fit(rows, "argus_ms")
    assert fixed == pytest.approx(0.012) and tflops == pytest.approx(800.0)
    fixed, tflops = bench._k_fit(rows, "torch_ms")
    assert fixed == pytest.approx(0.010) and tflops == pytest.approx(1600.0)
