"""The gfx942 target of ``argus compile FILE --target gfx942 [-o out.hsaco | --emit asm]``.

``argus compile`` (:mod:`argus.backend_ptx.cli`) parses the file, specializes the kernel and
passes the verification gate; for ``--target gfx942`` it hands the proved specialization to
:func:`write_output`: ``--emit hsaco`` (the default) writes the linked code object, ``--emit
asm`` the assembly text.  Either way the emitted code has passed the hazard checker.
``--policy accumulators=vgpr,mfma_priority=2`` sets :class:`~argus.backend_amdgcn.isel.Policy`
fields.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from typing import Any

from argus.errors import ArgusError

EMITS = ("hsaco", "asm")


def parse_policy(text: str | None) -> Any:
    """``"accumulators=vgpr,mfma_priority=2"`` -> ``Policy(accumulators="vgpr", mfma_priority=2)``."""
    from dataclasses import fields

    from argus.backend_amdgcn.isel import Policy

    if not text:
        return Policy()
    known = {f.name for f in fields(Policy)}
    values: dict[str, Any] = {}
    for item in text.split(","):
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise ArgusError(f"--policy {item!r}", hint=f"fields: {', '.join(sorted(known))} (NAME=VALUE, comma-separated)")
        try:
            values[name] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            values[name] = raw.strip()
    return Policy(**values)


def write_output(specialized: Any, args: argparse.Namespace) -> int:
    """Emit, check and write one proved specialization for gfx942 (after the gate)."""
    from argus.backend_amdgcn.compile import HazardError, emit

    emit_kind = args.emit or "hsaco"
    if emit_kind not in EMITS:
        raise ArgusError(f"--emit {emit_kind} is not a gfx942 output", hint="use --emit hsaco or --emit asm")
    emitted = emit(specialized, parse_policy(getattr(args, "policy", None)))
    hazards = emitted.hazards()
    if hazards:
        raise HazardError(specialized.name, hazards)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    if emit_kind == "asm":
        out.write_text(emitted.source)
    else:
        out.write_bytes(emitted.assemble())
    r = emitted.resources
    print(f"{specialized.name} (gfx942): wrote {out} ({r.unified_vgprs} VGPRs incl. {r.agprs} AGPRs, "
          f"{r.sgpr_count} SGPRs, {r.lds_bytes} bytes LDS)")
    return 0
