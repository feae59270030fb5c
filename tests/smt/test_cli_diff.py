"""``argus smt-diff`` through ``argus.cli.main``: JSON report, inputs, errors, exit codes."""

from __future__ import annotations

import json

import pytest
import smt_fault_backends as faults

from argus.cli import main
from argus.errors import ArgusError
from argus.smt.cli_diff import parse_options, parse_rlimits
from argus.smt.query import Query
from argus.smt.smtlib import query_to_smtlib
from argus.smt.terms import eq, int_var

TOP_KEYS = {
    "schema", "argus_version", "solvers", "seed", "total", "elapsed_s", "counts", "findings",
    "queries",
}  # fmt: skip
QUERY_KEYS = {
    "id", "source", "logic", "category", "wrong", "truth", "detail", "oracle", "solvers",
    "reproducer", "minimized", "reproduces",
}  # fmt: skip
RUN_KEYS = {"status", "reason", "message", "seconds", "resources", "model_check"}


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["smt-diff", *argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_generate_json_report_has_the_documented_keys(capsys):
    code, report = run_json(capsys, "--generate", "20", "--seed", "1")
    assert code == 0
    assert set(report) == TOP_KEYS
    assert report["schema"] == 1 and report["seed"] == 1 and report["total"] == 20
    assert set(report["solvers"]) == {"z3", "cvc5"}
    for info in report["solvers"].values():
        assert set(info) == {"version", "options", "rlimit"} and info["version"]
    assert sum(report["counts"].values()) == 20 and "soundness" in report["counts"]
    assert report["findings"] == 0
    for query in report["queries"]:
        assert set(query) == QUERY_KEYS
        assert query["id"].startswith("gen-1-")
        assert set(query["oracle"]) == {"status", "points", "undefined_points"}
        for run in query["solvers"].values():
            assert set(run) == RUN_KEYS


def test_same_seed_same_classification(capsys):
    _, first = run_json(capsys, "--generate", "15", "--seed", "9")
    _, second = run_json(capsys, "--generate", "15", "--seed", "9")

    def stable(report):
        return [(q["id"], q["truth"], q["oracle"], {s: r["status"] for s, r in q["solvers"].items()})
                for q in report["queries"]]  # fmt: skip

    assert stable(first) == stable(second)


def test_files_and_directories(tmp_path, capsys):
    x = int_var("x", 0, 20)
    (tmp_path / "vc").mkdir()
    (tmp_path / "vc" / "argus.smt2").write_text(query_to_smtlib(Query.of(eq(x % 7, 6), x > 10)))
    (tmp_path / "plain.smt2").write_text(
        "(set-logic QF_LIA)\n(declare-const y Int)\n"
        "(assert (and (<= 0 y) (< y 30)))\n(assert (= (mod y 8) 9))\n(check-sat)\n"
    )
    (tmp_path / "broken.smt2").write_text("(assert (frobnicate 1))\n")
    (tmp_path / "notes.txt").write_text("not a query")
    code, report = run_json(capsys, str(tmp_path))
    assert code == 0
    by_name = {q["id"].rsplit("/", 1)[-1]: q for q in report["queries"]}
    assert set(by_name) == {"argus.smt2", "plain.smt2", "broken.smt2"}
    assert by_name["argus.smt2"]["category"] == "agree" and by_name["argus.smt2"]["truth"] == "sat"
    plain = by_name["plain.smt2"]
    assert plain["category"] == "agree" and plain["oracle"]["status"] == "unsat"
    assert plain["oracle"]["points"] == 30  # bounds read from the assertions
    assert by_name["broken.smt2"]["category"] == "error"


def test_findings_exit_one_and_write_reproducers(tmp_path, capsys):
    liar = faults.register("z3-cli-liar", "wrong_verdict")
    out = tmp_path / "repro"
    code, report = run_json(
        capsys, "--generate", "6", "--seed", "3", "--solvers", f"{liar},cvc5", "--out", str(out)
    )
    assert code == 1 and report["findings"] >= 1
    found = [q for q in report["queries"] if q["category"] == "soundness"]
    assert found and all(q["wrong"] == [liar] for q in found)
    for q in found:
        assert q["reproducer"] and q["reproduces"] is True
        assert q["minimized"]["size_after"] <= q["minimized"]["size_before"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        q["reproducer"].rsplit("/", 1)[-1] for q in found
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--generate", "3", "--options", "z3:no_such.param=1"],
            "unknown parameter 'no_such.param'",
        ),
        (["--generate", "3", "--options", "cvc5:no-such-option=1"], "unrecognized option"),
        (["--generate", "3", "--options", "z3=1"], "bad --options"),
        (["--generate", "3", "--options", "yices:x=1"], "not compared"),
        (["--generate", "3", "--solvers", "z3"], "at least two solvers"),
        (["--generate", "3", "--solvers", "z3,mathsat"], "unknown solver 'mathsat'"),
        (["--generate", "3", "--rlimit", "z3=lots"], "bad --rlimit"),
        ([], "nothing to test"),
        (["/no/such/dir"], "no such file or directory"),
    ],
)
def test_configuration_errors_are_clear(argv, message, capsys):
    code = main(["smt-diff", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("argus: error:") and message in err
    assert "Traceback" not in err


def test_option_and_rlimit_parsing():
    assert parse_options(["z3:a=1,b=x", "cvc5:c=3"], ["z3", "cvc5"]) == {
        "z3": {"a": "1", "b": "x"},
        "cvc5": {"c": "3"},
    }
    assert parse_rlimits(["1000"], ["z3", "cvc5"]) == {"z3": 1000, "cvc5": 1000}
    assert parse_rlimits(["500", "cvc5=20"], ["z3", "cvc5"]) == {"z3": 500, "cvc5": 20}
    assert parse_rlimits([], ["z3"]) is None
    with pytest.raises(ArgusError):
        parse_options(["z3:novalue"], ["z3"])


def test_human_summary(capsys):
    code = main(["smt-diff", "--generate", "5", "--seed", "2"])
    captured = capsys.readouterr()
    assert code == 0
    assert "smt-diff summary" in captured.out and "5 queries" in captured.out
