"""The verification gate: nothing reaches a GPU unless its specialization is proved.

:func:`require_proof` returns a :class:`~argus.proofs.ProofRecord` that proves the kernel, or
raises :class:`VerificationRequired` with the verification report (counterexamples included).
A record satisfies the gate when it *matches* the kernel (same IR after policies, assumptions
and argus version: :meth:`ProofRecord.matches`) and its verdict is ``proved``.  Records are
looked up in the directories of ``$ARGUS_PROOF_PATH`` (``os.pathsep``-separated), in the
repository's ``proofs/`` and in ``<cache>/proofs``; when none matches, the verifier runs here
(the solvers are imported only then) and a proof is saved to ``<cache>/proofs``.  A GPU machine
without solvers therefore runs kernels proved elsewhere, and nothing else.

There is no option that skips the gate.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from argus.errors import ArgusError
from argus.ir import nodes as N

__all__ = ["VerificationRequired", "find_record", "proof_dirs", "require_proof", "save_record"]


class VerificationRequired(ArgusError):
    """The kernel is not proved: refuted (with counterexamples), unknown, or unverifiable here."""

    def __init__(self, message: str, *, report: Any = None, record: Any = None, hint: str | None = None) -> None:
        self.report = report
        self.record = record
        super().__init__(message, hint=hint)

    @property
    def counterexamples(self) -> list[Any]:
        return list(self.report.counterexamples) if self.report is not None else []


def proof_dirs() -> list[Path]:
    from argus.backend_ptx.assemble import cache_dir

    dirs = [Path(p) for p in os.environ.get("ARGUS_PROOF_PATH", "").split(os.pathsep) if p]
    dirs.append(Path(__file__).resolve().parents[2] / "proofs")
    dirs.append(cache_dir() / "proofs")
    return dirs


def _record_name(kernel: N.Kernel, digest: str) -> str:
    return f"{kernel.name}-{digest[:16]}.json"


def find_record(kernel: N.Kernel) -> Any:
    """A record that matches ``kernel`` (proved first), or None."""
    from argus.proofs.record import ProofRecord
    from argus.spec.kernel import kernel_hash

    digest = kernel_hash(kernel)
    found = None
    for directory in proof_dirs():
        if not directory.is_dir():
            continue
        # the cache names records by hash, `argus verify --records` by consts (``name[K=V].json``)
        named = sorted(p for p in directory.glob(f"{kernel.name}*.json")
                       if p.name[len(kernel.name)] in "-[.")
        for path in [directory / _record_name(kernel, digest), *named]:
            if not path.is_file():
                continue
            try:
                record = ProofRecord.load(path)
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if record.kernel_hash == digest and record.matches(kernel):
                if record.proved:
                    return record
                found = found or record
    return found


def save_record(kernel: N.Kernel, record: Any, directory: Path | None = None) -> Path:
    from argus.backend_ptx.assemble import cache_dir

    directory = directory or cache_dir() / "proofs"
    return record.save(directory / _record_name(kernel, record.kernel_hash))


def _title(kernel: N.Kernel) -> str:
    consts = ", ".join(f"{k}={v!r}" for k, v in kernel.consts)
    return kernel.name + (f" [{consts}]" if consts else "")


def require_proof(kernel: N.Kernel, *, verify: bool = True) -> Any:
    """The proof record of ``kernel`` (IR after policies), verifying it here when none matches.

    ``verify=False`` only forbids running the solvers (a machine without them): an unproved
    kernel is refused either way.
    """
    record = find_record(kernel)
    if record is not None and record.proved:
        return record
    if record is not None and record.verdict == "refuted":
        raise VerificationRequired(
            f"{_title(kernel)} is refuted by its proof record (kernel hash {record.kernel_hash[:16]}); "
            "it will not be compiled", record=record,
            hint="run `argus verify` on the kernel to see the counterexample")
    if not verify:
        raise VerificationRequired(f"{_title(kernel)} has no matching proof record and verification is off here",
                                   record=record, hint="prove it with `argus verify --records DIR` and add DIR "
                                   "to $ARGUS_PROOF_PATH")
    import importlib.util

    missing = [m for m in ("z3", "cvc5") if importlib.util.find_spec(m) is None]
    try:
        from argus.proofs.verify import verify_kernel
    except ImportError as err:
        missing.append(str(err))
    if len(missing) >= 2:  # neither solver: the verifier cannot run on this machine
        raise VerificationRequired(
            f"{_title(kernel)} has no matching proof record and the verifier cannot run here "
            f"(not installed: {', '.join(missing)})",
            hint="prove it on a machine with z3/cvc5 (`argus verify --records DIR`) and set ARGUS_PROOF_PATH=DIR")
    report = verify_kernel(kernel)
    if report.verdict == "proved":
        save_record(kernel, report.record)
        return report.record
    raise VerificationRequired(
        f"{_title(kernel)} is not proved (verdict {report.verdict}); it will not be compiled:\n{report.human()}",
        report=report, record=report.record,
        hint="fix the kernel (counterexamples above)" if report.verdict == "refuted" else
        "the verifier could not decide every condition (reasons above); simplify the kernel or declare what it needs")
