"""A disk cache of :class:`launchers.render.JobScripts`' templates, so that a plan need not import NeMo-Run.

A template is the job script NeMo-Run's dry run renders for a placeholder variant of one shape (cluster profile,
attempt, repeat, mode, hold, batch title and label, ...). Importing NeMo-Run for that one dry run costs about 1.5-2 s,
most of a 1,000-variant ``action=plan``. The text depends on the sweep folder only through its path, so it is kept
with the sweep folder's path (and the planner's scratch layout's) replaced by tokens, under a key that holds every
other input: the shape, the job environment (``cluster_env``: the profile's variables and which secret names this
shell passes through; only a SHA-256 of it is kept, never a value), this interpreter, the working folder, ``PATH``
and ``CUDA_VISIBLE_DEVICES``, the source of ``launchers/`` and ``contracts/``, and the installed files (``RECORD``)
of NeMo-Run, torchx, Jinja2 and fiddle. A change to any of them is another key.

Only plain paths (``[A-Za-z0-9_./-]``, no ``/nemo_run`` in the sweep folder's own path) are cached: those are the
paths NeMo-Run and ``shlex.quote`` leave as they are, so the token stands for exactly one text.

Where: ``$MOE_SWEEP_CACHE`` (a folder; ``off`` disables the cache), else ``$XDG_CACHE_HOME/moe-overlap-sweep``,
else ``~/.cache/moe-overlap-sweep``; files ``job-templates/<sha256>.sh``, about 2 KB each, one per shape. Removing
the folder is always safe. Nothing here raises: a cache that cannot be read or written is skipped (the dry run
runs instead). Tests: tests/launchers/test_render_cache.py, tests/experiments/test_plan_fast.py.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

CACHE_ENV = "MOE_SWEEP_CACHE"
FORMAT = 1  # bump when the stored form changes
ROOT_TOKEN = "@@moe-sweep-root-Zq7@@"
SCRATCH_TOKEN = "@@moe-sweep-scratch-Zq7@@"
_PLAIN = re.compile(r"/[A-Za-z0-9_./-]*")
_DEPENDENCIES = ("nemo_run", "torchx", "jinja2", "fiddle")  # what renders the sbatch text
_ENVIRON = ("PATH", "CUDA_VISIBLE_DEVICES")  # read by the local executor's launcher (launchers/local.py)


def cache_dir() -> Path | None:
    """The template folder, or None when ``MOE_SWEEP_CACHE=off``."""
    given = os.environ.get(CACHE_ENV)
    if given is not None:
        return None if given.strip().lower() in ("", "off", "0", "false", "no") else Path(given) / "job-templates"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "moe-overlap-sweep" / "job-templates"


@cache
def _code_digest() -> str:
    """SHA-256 of the launchers' and contracts' source and of the installed rendering libraries' RECORD files."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for folder in (here, here.parent / "contracts"):
        for path in sorted(folder.glob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    for name in _DEPENDENCIES:
        spec = importlib.util.find_spec(name)
        origin = Path(spec.origin).parent if spec and spec.origin else None
        h.update(name.encode() + b"\0")
        if origin is None:
            continue
        for record in sorted(origin.parent.glob(f"{name}-*.dist-info/RECORD")):
            h.update(record.read_bytes())
    return h.hexdigest()


def _plain(path: Path) -> bool:
    return bool(_PLAIN.fullmatch(str(path))) and "/nemo_run" not in str(path)


def _sub(text: str, path: str, token: str) -> str:
    """``text`` with each whole occurrence of ``path`` (not one inside a longer name) replaced by ``token``."""
    return re.sub(rf"(?<![A-Za-z0-9_.-]){re.escape(path)}(?![A-Za-z0-9_.-])", token, text)


class TemplateCache:
    """Lookup and store of the template of one shape. ``root``: the sweep folder (``state_dir``'s parent);
    ``scratch``: the layout the placeholder's variant file sits in (the planner's scratch copy, or ``root``);
    ``shape``: every argument of the render but the variant; ``env``: the job environment (``cluster_env``)."""

    def __init__(self, root: Path, scratch: Path, shape: Any, env: Any) -> None:
        folder = cache_dir()
        self.root, self.scratch = str(root), str(scratch)
        self.path: Path | None = None
        if folder is not None and _plain(root) and _plain(scratch):
            local = [os.environ.get(name) for name in _ENVIRON]
            key = self._tokens(repr((FORMAT, _code_digest(), sys.executable, os.getcwd(), local, shape, env)))
            self.path = folder / f"{hashlib.sha256(key.encode()).hexdigest()}.sh"

    def _tokens(self, text: str) -> str:
        # every input and the text get the same tokens, so an input under the sweep folder (a mount, this
        # interpreter) keys the template by its place relative to the folder; the longer path goes first
        for path, token in sorted(((self.root, ROOT_TOKEN), (self.scratch, SCRATCH_TOKEN)), key=lambda p: -len(p[0])):
            text = _sub(text, path, token)
        return text

    def load(self) -> str | None:
        """The cached template with this sweep's paths, or None (not cached, unreadable, or not cacheable)."""
        if self.path is None:
            return None
        try:
            text = self.path.read_text()
        except OSError:
            return None
        return text.replace(SCRATCH_TOKEN, self.scratch).replace(ROOT_TOKEN, self.root)

    def store(self, template: str) -> None:
        """Keep ``template``, rendered for this sweep, with the sweep's paths as tokens."""
        if self.path is None or ROOT_TOKEN in template or SCRATCH_TOKEN in template:
            return
        from contracts.atomic import write_text

        try:
            write_text(self.path, self._tokens(template))
        except OSError:
            pass  # a read-only or full cache: the next plan renders again
