"""argus.smt: verification-condition terms, solver translation, SMT-LIB I/O and solving.

Depends only on :mod:`argus.symbolic` and :mod:`argus.errors`.

=====================  ==================================================================
module                 what it holds
=====================  ==================================================================
``terms``              the term language: sorts, interned terms, guards (definedness)
``query``              queries (assertions + variable domains + logic), validity VCs
``logic``              logic detection (QF_LIA, QF_NIA, QF_BV, QF_UF*, mixed)
``evaluate``           concrete evaluation (the oracle every model is checked against)
``from_sympy``         layout-algebra sympy expressions to terms
``z3_backend``         terms to Z3, Z3 models to Python values
``cvc5_backend``       terms to cvc5, cvc5 values to Python values
``smtlib``             SMT-LIB 2 printer and reader
``session``            in-process incremental sessions over one solver
=====================  ==================================================================

Solvers are imported lazily: ``import argus.smt`` does not load z3 or cvc5.
"""

from argus.smt.evaluate import (
    BitwiseOutOfRange,
    DivisionByZero,
    EvaluationError,
    UnboundName,
    Undefined,
    evaluate,
    evaluate_all,
    satisfies,
)
from argus.smt.from_sympy import SympyConversionError, from_sympy
from argus.smt.logic import LogicFeatures, detect_logic
from argus.smt.query import Query, validity_queries
from argus.smt.smtlib import (
    Command,
    SmtlibError,
    parse_script,
    parse_term,
    query_to_smtlib,
    read_query,
    script_to_smtlib,
    term_to_smtlib,
)
from argus.smt.terms import *  # noqa: F403
from argus.smt.terms import __all__ as _terms_all

__all__ = [
    *_terms_all,
    "BitwiseOutOfRange",
    "Command",
    "DivisionByZero",
    "EvaluationError",
    "LogicFeatures",
    "Query",
    "SmtlibError",
    "SympyConversionError",
    "UnboundName",
    "Undefined",
    "detect_logic",
    "evaluate",
    "evaluate_all",
    "from_sympy",
    "parse_script",
    "parse_term",
    "query_to_smtlib",
    "read_query",
    "satisfies",
    "script_to_smtlib",
    "term_to_smtlib",
    "validity_queries",
]


def __getattr__(name: str):
    # sessions import a solver; load them on first use
    if name in ("Session", "CheckAnswer", "solve"):
        from argus.smt import session

        return getattr(session, name)
    raise AttributeError(f"module 'argus.smt' has no attribute {name!r}")


# ---------------------------------------------------------------------------------------
# Portfolio, workers and results (maintained with portfolio.py / worker.py / results.py):
# append their re-exports below this line.
# ---------------------------------------------------------------------------------------
from argus.smt.portfolio import DEFAULT_RLIMIT, Portfolio, PortfolioSession  # noqa: E402
from argus.smt.results import Proved, Refuted, Result, SolverRun, Unknown  # noqa: E402
from argus.smt.worker import register_backend  # noqa: E402

__all__ += [
    "DEFAULT_RLIMIT",
    "Portfolio",
    "PortfolioSession",
    "Proved",
    "Refuted",
    "Result",
    "SolverRun",
    "Unknown",
    "register_backend",
]
