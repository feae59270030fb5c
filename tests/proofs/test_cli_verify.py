"""``argus verify``: exit codes, JSON report, SMT-LIB dump, consts and kernel selection."""

import argparse
import json
from pathlib import Path

import pytest

from argus.cli import main
from argus.errors import ArgusError
from argus.proofs import cli_verify
from argus.smt.smtlib import read_query

ROOT = Path(__file__).resolve().parents[2]
KERNELS = str(ROOT / "tests" / "proofs" / "verifier_kernels.py")


def test_a_proved_file_exits_zero(capsys):
    assert main(["verify", str(ROOT / "examples" / "vector_add.py"), "--solver", "z3"]) == 0
    out = capsys.readouterr().out
    assert "vector_add [BLOCK=128]: proved" in out


def test_a_refuted_kernel_exits_one_with_json(capsys):
    code = main(["verify", KERNELS, "--kernel", "tail_store", "--consts", "PREDICATED=False",
                 "--solver", "z3", "--json"])
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "argus.verify" and report["exit"] == 1
    (kernel,) = report["kernels"]
    assert kernel["kernel"] == "tail_store" and kernel["consts"] == {"PREDICATED": False}
    assert kernel["verdict"] == "refuted"
    (cx,) = kernel["counterexamples"]
    assert cx["property"] == "in-bounds" and cx["replay"]["status"] == "reproduced"


def test_unknown_exits_two(capsys):
    assert main(["verify", KERNELS, "--kernel", "uneven_barriers", "--solver", "z3"]) == 2
    assert "number of barriers that depends on its counter" in capsys.readouterr().out


def test_smtlib_dir_holds_every_query(tmp_path, capsys):
    assert main(["verify", KERNELS, "--kernel", "block_tiles", "--solver", "z3", "--json",
                 "--smtlib", str(tmp_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    solved = [v for v in report["kernels"][0]["vcs"] if v["solver"] not in ("structural", None)]
    files = sorted(tmp_path.rglob("*.smt2"))
    assert len(files) == len(solved)
    query = read_query(files[0].read_text())
    assert query.terms  # a stock solver can re-run it


def test_records_and_cache_dirs(tmp_path, capsys):
    args = ["verify", str(ROOT / "examples" / "vector_add.py"), "--solver", "z3",
            "--records", str(tmp_path / "proofs"), "--cache", str(tmp_path / "cache")]
    assert main(args) == 0
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert all(v["cached"] for v in report["kernels"][0]["vcs"] if v["solver"] != "structural")
    assert list((tmp_path / "proofs").glob("vector_add*.json"))


def test_seed_cache_from_records(tmp_path, capsys):
    example = str(ROOT / "examples" / "vector_add.py")
    assert main(["verify", example, "--solver", "z3", "--records", str(tmp_path / "proofs")]) == 0
    capsys.readouterr()
    assert main(["verify", example, "--solver", "z3", "--seed-cache", str(tmp_path / "proofs"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    solved = [v for v in report["kernels"][0]["vcs"] if v["solver"] != "structural"]
    assert solved and all(v["cached"] for v in solved)
    assert main(["verify", example, "--seed-cache", str(tmp_path / "nowhere")]) == 2
    assert "--seed-cache" in capsys.readouterr().err


def test_user_errors_are_reported_with_a_hint(capsys):
    parser = argparse.ArgumentParser()
    cli_verify.add_arguments(parser)
    with pytest.raises(ArgusError, match="no kernel named nope") as err:
        cli_verify.run(parser.parse_args([KERNELS, "--kernel", "nope"]))
    assert "tagged_copy" in err.value.hint
    assert main(["verify", KERNELS, "--consts", "NOPE=1", "--solver", "z3"]) == 2
    assert "no kernel has a const named NOPE" in capsys.readouterr().err


def _module(tmp_path, monkeypatch, name="argus_test_kernels"):
    """An importable module holding vector_add and a factory of it (as a library would)."""
    source = (ROOT / "examples" / "vector_add.py").read_text()
    (tmp_path / f"{name}.py").write_text(source + "\n\ndef make(block, *, tail=True):\n"
                                         "    assert tail\n    return vector_add\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_a_library_kernel_is_named_by_module_and_factory(tmp_path, monkeypatch, capsys):
    name = _module(tmp_path, monkeypatch)
    assert main(["verify", f"{name}:vector_add", "--solver", "z3"]) == 0
    assert "vector_add [BLOCK=128]: proved" in capsys.readouterr().out
    (kernel,) = cli_verify.load_kernels(f"{name}:make(128, tail=True)")
    assert kernel.name == "vector_add"
    for bad, message in ((f"{name}:nothing", "no attribute"), ("no_such_module_x:k", "cannot import"),
                         (f"{name}:make(x)", "literal arguments"), (f"{name}:make()", "neither a kernel"),
                         (f"{name}:A", "not an @argus.spec.kernel")):
        with pytest.raises(ArgusError, match=message):
            cli_verify.load_kernels(bad)


def test_the_resource_limit_decides_and_is_recorded(tmp_path, capsys):
    from argus.proofs import ProofRecord

    records = tmp_path / "records"
    vector_add = str(ROOT / "examples" / "vector_add.py")
    assert main(["verify", vector_add, "--solver", "z3", "--rlimit", "20000000", "--records", str(records)]) == 0
    (path,) = records.glob("*.json")
    assert ProofRecord.load(path).rlimits == {"z3": 20_000_000}
    assert main(["verify", vector_add, "--solver", "z3", "--rlimit", "1"]) == 2  # every VC gives up: unknown
    assert "resource" in capsys.readouterr().out
    assert main(["verify", vector_add, "--rlimit", "0"]) != 0
    assert "--rlimit 0: must be positive" in capsys.readouterr().err
