"""The device bundle's package list, taken from pyproject.toml, so that the bring-up cannot
miss a dependency pyproject names.

Standard library only (tomllib), so the device image's bare ``python3`` runs it as well as the workstation's.

    python3 scripts/gpu/deps.py carry     name==version per line: runtime deps the device image lacks
                                          (prepare_workstation.sh downloads exactly these, plus the Megatron path)
    python3 scripts/gpu/deps.py gpu       name==version per line: the ``gpu`` extra (megatron-core,
                                          megatron-bridge, transformer-engine), the payload's stack
    python3 scripts/gpu/deps.py version NAME   the pinned version of NAME in the gpu extra (e.g. megatron-core)
    python3 scripts/gpu/deps.py imports   the import name of every runtime dep and of the gpu extra, one per line
                                          (device_stage.sh ``orch`` / ``imports`` check each of them)

Versions: an exact ``==`` pin in pyproject wins; a range (``>=``) is resolved to the version installed in the
Python that runs this script (the workstation's .venv, where the tests passed), so the device gets the same.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# On the H200 device image already (its pip freeze, device stage `info`): imported from there, not carried.
ON_IMAGE = frozenset({"rich", "numpy", "scipy", "matplotlib", "filelock", "pyarrow"})
# distribution -> import name, where they differ
IMPORT_NAMES = {"hydra-core": "hydra", "google-re2": "re2", "nemo-run": "nemo_run", "pyyaml": "yaml",
                "megatron-core": "megatron.core", "megatron-bridge": "megatron.bridge",
                "transformer-engine": "transformer_engine", "psycopg-binary": None}
# an extra of a runtime dep that is a distribution of its own (psycopg[binary] -> psycopg-binary)
EXTRA_DISTS = {("psycopg", "binary"): "psycopg-binary"}
_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?\s*([^;#]*)")


def normalize(name: str) -> str:
    """PEP 503 name: lower case, runs of ``-_.`` as ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirement(text: str) -> tuple[str, tuple[str, ...], str]:
    """(normalized name, extras, version spec) of one pyproject requirement string.

    Raises:
        ValueError: not a requirement (no distribution name).
    """
    m = _REQ.match(text)
    if not m:
        raise ValueError(f"not a requirement: {text!r}")
    extras = tuple(e.strip() for e in (m.group(2) or "").split(",") if e.strip())
    return normalize(m.group(1)), extras, m.group(3).strip()


def pyproject(root: Path = ROOT) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text())


def _pin(name: str, spec: str) -> str:
    exact = re.fullmatch(r"==\s*([^,\s]+)", spec)
    if exact:
        return exact.group(1)
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        raise SystemExit(f"deps.py: {name}{spec} has no exact pin and is not installed here; "
                         "run `bash scripts/setup.sh test` first") from None


def runtime(root: Path = ROOT) -> list[tuple[str, tuple[str, ...], str]]:
    """The project's runtime dependencies (``[project] dependencies``), parsed."""
    return [parse_requirement(r) for r in pyproject(root)["project"]["dependencies"]]


def gpu_extra(root: Path = ROOT) -> list[tuple[str, tuple[str, ...], str]]:
    """The ``gpu`` extra, parsed (``[project.optional-dependencies] gpu``)."""
    return [parse_requirement(r) for r in pyproject(root)["project"]["optional-dependencies"]["gpu"]]


def carry(root: Path = ROOT) -> list[str]:
    """``name==version`` of every runtime dependency not on the device image (extras that are distributions of
    their own included, e.g. psycopg-binary), in pyproject order."""
    out = []
    for name, extras, spec in runtime(root):
        if name in ON_IMAGE:
            continue
        version = _pin(name, spec)
        out.append(f"{name}=={version}")
        for extra in extras:
            dist = EXTRA_DISTS.get((name, extra))
            if dist:
                out.append(f"{dist}=={version}")  # the binary part is released with the same version
    return out


def gpu(root: Path = ROOT) -> list[str]:
    """``name==version`` of the gpu extra's exact pins (torch, a range, is the image's own and is left out)."""
    return [f"{n}=={spec[2:].strip()}" for n, _, spec in gpu_extra(root) if spec.startswith("==")]


def imports(root: Path = ROOT) -> list[str]:
    """Import names of the runtime deps and the gpu extra's Megatron/TE packages."""
    names = []
    for name, _, _ in [*runtime(root), *gpu_extra(root)]:
        mod = IMPORT_NAMES.get(name, name.replace("-", "_"))
        if mod and mod not in names:
            names.append(mod)
    return names


def main(argv: list[str]) -> int:
    cmds = {"carry": carry, "gpu": gpu, "imports": imports}
    if len(argv) == 2 and argv[0] == "version":
        found = [p.split("==")[1] for p in gpu() if p.split("==")[0] == normalize(argv[1])]
        if not found:
            print(f"deps.py: {argv[1]} is not pinned in the gpu extra", file=sys.stderr)
            return 2
        print(found[0])
        return 0
    if len(argv) != 1 or argv[0] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    print("\n".join(cmds[argv[0]]()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
