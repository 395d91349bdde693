"""A resume runs the code checked out now, which may not be the code that planned the sweep: say so."""

from __future__ import annotations

import sys

from contracts.manifest import Manifest
from contracts.manifest_entries import code_revision


def revision_note(m: Manifest, current: str | None = None) -> str | None:
    """The warning for a sweep whose planning or latest attempts ran another git commit than ``current`` (default:
    this checkout's), or None. Each attempt records its own ``git_sha``; the manifest's top-level ``git_sha`` is
    the planner's."""
    current = current if current is not None else code_revision()
    if not current:
        return None
    seen = {str(m.git_sha)} if m.git_sha else set()
    seen |= {str(a.get("git_sha")) for v in m.variants for a in v.attempts if a.get("git_sha")}
    other = sorted(s for s in seen if s != current)
    if not other:
        return None
    return (f"warning: this checkout is at {current[:12]}, but sweep {m.sweep_id} was planned or run at "
            f"{', '.join(s[:12] for s in other)}: new attempts run the code checked out now (each attempt records "
            "its own git_sha)")


def warn_revision(m: Manifest) -> None:
    """Print :func:`revision_note` to stderr when there is one."""
    note = revision_note(m)
    if note:
        print(note, file=sys.stderr)
