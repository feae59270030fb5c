"""Proof records and the VC cache.

A :class:`ProofRecord` says what was proved about one kernel specialization and by whom.  It
is bound to ``kernel_hash`` (sha256 of the printed IR after policies and of the argus
version: :func:`argus.spec.kernel.kernel_hash`), the declared assumptions and the argus
version; it lists each VC with its hash (sha256 of the SMT-LIB query that was solved),
property, program point, verdict, the solver that decided it, its resource use and time,
and the solver versions.  A record whose binding does not match a kernel is ignored
(:meth:`ProofRecord.matches`).

:class:`VCCache` maps VC hashes to proved verdicts (in memory, or one JSON file per hash in
a directory), so an edited kernel re-verifies only the VCs that changed.  Only proofs are
cached: a refutation is re-derived (its counterexample must replay), an ``unknown`` may
succeed with another budget.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import argus

FORMAT = "argus.proof-record"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class VCEntry:
    """One VC's outcome as recorded."""

    id: str
    hash: str
    property: str
    op: str | None
    position: str | None
    verdict: str  # proved | refuted | unknown | error
    solver: str | None = None
    resources: int | None = None
    seconds: float = 0.0
    reason: str | None = None
    cached: bool = False


@dataclass
class ProofRecord:
    """What was proved about one kernel specialization (see the module docstring)."""

    kernel: str
    consts: dict[str, Any]
    kernel_hash: str
    assumptions: list[str]
    verdict: str
    vcs: list[VCEntry] = field(default_factory=list)
    solvers: dict[str, str] = field(default_factory=dict)
    argus_version: str = argus.__version__
    seconds: float = 0.0
    source: str | None = None  # the file defining the kernel (base name)
    rlimits: dict[str, int] | None = None  # the resource limit per solver the VCs were decided under

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "version": FORMAT_VERSION, "kernel": self.kernel,
            "consts": {k: list(v) if isinstance(v, tuple) else v for k, v in self.consts.items()},
            "kernel_hash": self.kernel_hash, "assumptions": self.assumptions, "argus_version": self.argus_version,
            "solvers": self.solvers, "verdict": self.verdict, "seconds": round(self.seconds, 3),
            "source": self.source,
            **({"rlimits": self.rlimits} if self.rlimits else {}),
            "vcs": [asdict(e) for e in self.vcs],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> ProofRecord:
        if data.get("format") != FORMAT or data.get("version") != FORMAT_VERSION:
            raise ValueError(f"not an {FORMAT} v{FORMAT_VERSION} record")
        return ProofRecord(
            kernel=data["kernel"], consts=dict(data["consts"]), kernel_hash=data["kernel_hash"],
            assumptions=list(data["assumptions"]), verdict=data["verdict"],
            vcs=[VCEntry(**e) for e in data["vcs"]], solvers=dict(data["solvers"]),
            argus_version=data["argus_version"], seconds=float(data.get("seconds", 0.0)),
            source=data.get("source"), rlimits=data.get("rlimits"))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n")
        return path

    @staticmethod
    def load(path: str | Path) -> ProofRecord:
        return ProofRecord.from_json(json.loads(Path(path).read_text()))

    def matches(self, kernel: Any) -> bool:
        """Does this record speak about ``kernel`` (same IR, assumptions and argus version)?"""
        from argus.spec.kernel import kernel_hash

        return (self.kernel_hash == kernel_hash(kernel) and self.argus_version == argus.__version__
                and self.assumptions == [a.text for a in kernel.assumptions])

    @property
    def proved(self) -> bool:
        return self.verdict == "proved"


class VCCache:
    """Proved VCs by hash; ``directory=None`` keeps them in memory only."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else None
        self._memory: dict[str, dict[str, Any]] = {}
        self.hits = 0

    def _path(self, vc_hash: str) -> Path:
        assert self.directory is not None
        return self.directory / vc_hash[:2] / f"{vc_hash}.json"

    def get(self, vc_hash: str) -> dict[str, Any] | None:
        entry = self._memory.get(vc_hash)
        if entry is None and self.directory is not None:
            path = self._path(vc_hash)
            if path.exists():
                try:
                    entry = json.loads(path.read_text())
                except (OSError, ValueError):
                    entry = None
                if entry is not None and entry.get("argus_version") != argus.__version__:
                    entry = None
                if entry is not None:
                    self._memory[vc_hash] = entry
        if entry is not None:
            self.hits += 1
        return entry

    def _has(self, vc_hash: str) -> bool:
        return vc_hash in self._memory or (self.directory is not None and self._path(vc_hash).exists())

    def seed(self, records: str | Path) -> int:
        """Takes the proved VCs of the proof records under ``records`` (a directory, e.g.
        ``proofs/``, or one record file) into the cache: a kernel edited since its record was
        written (a comment, a moved line: its IR, and so its kernel hash, changed) then re-solves
        only the queries the edit changed, also where no earlier cache exists.  A record trusted
        by the gate vouches for its VCs as the cache does; records of another argus version and
        files that are not records are skipped.  Returns the number of queries added."""
        path = Path(records)
        files = sorted(path.glob("*.json")) if path.is_dir() else [path]
        added = 0
        for file in files:
            try:
                record = ProofRecord.load(file)
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if record.argus_version != argus.__version__:
                continue
            for vc in record.vcs:
                if vc.verdict != "proved" or vc.solver in (None, "structural") or self._has(vc.hash):
                    continue
                self.put(vc.hash, {"verdict": "proved", "solver": vc.solver, "resources": vc.resources,
                                   "property": vc.property, "record": file.name})
                added += 1
        return added

    def put(self, vc_hash: str, entry: dict[str, Any]) -> None:
        """Keeps a proved query; or, under a ``split:`` key, the note that a run split that
        query into pieces (verdict ``split``: nothing proved, where a later run resumes)."""
        if entry.get("verdict") != ("split" if vc_hash.startswith("split:") else "proved"):
            return
        entry = {**entry, "argus_version": argus.__version__}
        self._memory[vc_hash] = entry
        if self.directory is not None:
            path = self._path(vc_hash)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(entry, sort_keys=True) + "\n")
