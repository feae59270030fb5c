"""argus.smt: verification-condition terms, solver translation, SMT-LIB I/O and solving.

Depends only on :mod:`argus.symbolic` and :mod:`argus.errors`.
"""

from argus.smt.terms import *  # noqa: F403
from argus.smt.terms import __all__ as _terms_all

__all__ = [*_terms_all]
