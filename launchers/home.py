"""NEMORUN_HOME for a sweep, and the lazy import of NeMo-Run.

NeMo-Run 0.11.1 reads ``NEMORUN_HOME`` when it is imported (``nemo_run.config._NEMORUN_HOME``) and several of
its modules copy it into module constants at import time (the Slurm job registry ``.slurm_jobs``, the local job
registry, the tunnel folder). :func:`use_nemorun_home` therefore sets the environment variable before the first
import and, when NeMo-Run is already imported, moves all of those too, so one process can serve several sweeps.

The sweep's NeMo-Run state lives in ``<sweep>/nemo_run/`` (CONTRACTS §3). NeMo-Run 0.11.1 rewrites every
``/nemo_run`` substring of a container-less sbatch script into the job folder
(``SlurmBatchRequest.materialize``: ``sbatch_script.replace(f"/{RUNDIR_NAME}", job_dir)``), which would mangle
every path below ``<sweep>/nemo_run``. NeMo-Run is therefore pointed at ``<sweep>/.nemorun_home``, a relative
symlink to ``nemo_run``: the files stay in ``nemo_run/`` and the script paths survive.

Importing ``nemo_run`` takes seconds (torchx, fiddle, the Lepton SDK, and torch unless
:mod:`launchers.nemorun_torch` keeps it out); nothing here imports it until a launcher really needs it
(:func:`nemo_run`, a function-local import), so ``python -m experiments.sweep
--help``, ``action=status`` and a plan whose job templates are cached (:mod:`launchers.templates`) never import it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from launchers.errors import LaunchConfigError

ALIAS_NAME = ".nemorun_home"
RUNDIR_TOKEN = "/nemo_run"  # nemo_run.config.RUNDIR_NAME with its slash: the substring NeMo-Run rewrites

# Module constants NeMo-Run 0.11.1 derives from NEMORUN_HOME at import time: (module, attribute, file name).
_IMPORT_TIME_PATHS = (
    ("nemo_run.run.torchx_backend.schedulers.slurm", "SLURM_JOB_DIRS", ".slurm_jobs"),
    ("nemo_run.run.torchx_backend.schedulers.local", "LOCAL_JOB_DIRS", ".local_jobs.json"),
    ("nemo_run.core.tunnel.client", "TUNNEL_FILE_SUBPATH", ".tunnels"),
)


def nemorun_home_path(state_dir: str | os.PathLike[str]) -> Path:
    """The path NeMo-Run should use as its home to keep its state in ``state_dir`` (nothing is created).

    ``state_dir`` itself when its absolute path has no ``/nemo_run`` substring, else the sibling
    ``.nemorun_home`` (a symlink to it, made by :func:`use_nemorun_home`).

    Raises:
        LaunchConfigError: a parent folder's name starts with ``nemo_run`` too, so no alias could avoid the rewrite.
    """
    real = Path(os.path.abspath(state_dir))
    if RUNDIR_TOKEN not in str(real):
        return real
    alias = real.parent / ALIAS_NAME
    if RUNDIR_TOKEN in str(alias):
        raise LaunchConfigError(
            f"the sweep folder {real.parent} has a folder named nemo_run* in its path; NeMo-Run 0.11.1 rewrites "
            f"'/nemo_run' in job scripts, so choose an output_dir without such a folder"
        )
    return alias


def ensure_nemorun_home(state_dir: str | os.PathLike[str]) -> Path:
    """Create ``state_dir`` and, when needed, the ``.nemorun_home`` symlink to it; return the home path."""
    real = Path(os.path.abspath(state_dir))
    home = nemorun_home_path(real)
    real.mkdir(parents=True, exist_ok=True)
    if home != real:
        if home.is_symlink() or home.exists():
            if home.resolve() != real.resolve():
                raise LaunchConfigError(f"{home} exists and does not point to {real}; remove it")
        else:
            home.symlink_to(real.name, target_is_directory=True)
    return home


def use_nemorun_home(state_dir: str | os.PathLike[str]) -> Path:
    """Make NeMo-Run keep its state in ``state_dir`` (the sweep's ``nemo_run/``); returns the home it uses.

    Sets ``os.environ["NEMORUN_HOME"]`` (read at import) and, if NeMo-Run is already imported, calls
    ``nemo_run.config.set_nemorun_home`` and updates the registry paths its modules computed at import.
    """
    home = ensure_nemorun_home(state_dir)
    os.environ["NEMORUN_HOME"] = str(home)
    _point_imported_modules(str(home))
    return home


def _point_imported_modules(home: str) -> None:
    config = sys.modules.get("nemo_run.config")
    if config is None:
        return
    config.set_nemorun_home(home)
    for module_name, attr, leaf in _IMPORT_TIME_PATHS:
        module = sys.modules.get(module_name)
        if module is not None and hasattr(module, attr):
            setattr(module, attr, os.path.join(home, leaf))


def nemo_run(state_dir: str | os.PathLike[str] | None = None) -> ModuleType:
    """Import and return the ``nemo_run`` module, with its home set to ``state_dir`` first when given."""
    if state_dir is not None:
        use_nemorun_home(state_dir)
    from launchers.nemorun_torch import import_nemo_run

    return import_nemo_run()


@contextlib.contextmanager
def nemorun_home(state_dir: str | os.PathLike[str]) -> Iterator[Path]:
    """Use ``state_dir`` as NeMo-Run's home inside the block, then restore the previous home."""
    previous = os.environ.get("NEMORUN_HOME")
    home = use_nemorun_home(state_dir)
    try:
        yield home
    finally:
        if previous is None:
            os.environ.pop("NEMORUN_HOME", None)
            _point_imported_modules(os.path.expanduser("~/.nemo_run"))  # NeMo-Run's own default
        else:
            os.environ["NEMORUN_HOME"] = previous
            _point_imported_modules(previous)


@contextlib.contextmanager
def no_stdin() -> Iterator[None]:
    """Give NeMo-Run's shell calls an empty stdin while they run.

    NeMo-Run runs git, tar and sbatch through invoke, which forwards this process's stdin to them (and, on a
    terminal, switches it to raw mode): under pytest that read fails, and under a live display it would eat
    keystrokes. The commands need no input.
    """
    saved = sys.stdin
    with open(os.devnull) as devnull:
        sys.stdin = devnull
        try:
            yield
        finally:
            sys.stdin = saved
