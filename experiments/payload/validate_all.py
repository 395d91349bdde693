"""Validate many variants in one process: the job behind ``preflight=container`` (CONTRACTS §1).

Usage::

    python -m experiments.payload.validate_all SOURCE [SOURCE ...] OUT_DIR

A SOURCE is a sweep folder (its ``variants/*/variant.json``), a folder of variant folders, one ``variant.json``,
or a text file listing variant.json paths (one per line; ``#`` starts a comment). Libraries are imported once.
For each variant it writes ``OUT_DIR/<variant>/effective_config.json`` (validate mode, CONTRACTS §6) and prints
one line ``[payload] validate <variant>: pass|fail|error ...``; ``OUT_DIR/validate_all.json`` lists every result.

Exit codes: 0 every variant passed; 1 at least one failed (a library check, a mismatch, or a per-variant error
such as an unknown recipe); 10 a source is missing or holds no variant, or a variant file is bad;
13 megatron.core is not importable (nothing can be checked).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from experiments.payload import errors
from experiments.payload.cli import error_document
from experiments.payload.effective import write_atomic
from experiments.payload.errors import BadVariantFile, BridgeMissing, CoreMissing, PayloadError
from experiments.payload.mcore_check import load_core
from experiments.payload.outcome import EFFECTIVE_FILE, loud
from experiments.payload.runtime_info import say
from experiments.payload.spec import load_variant

SUMMARY_FILE = "validate_all.json"


def find_variant_files(source: str | Path) -> list[Path]:
    """The variant.json files a SOURCE stands for (see the module docstring), sorted.

    Raises:
        BadVariantFile: the source does not exist or holds no variant.json.
    """
    p = Path(source)
    if p.is_dir():
        for pattern in ("variant.json", "variants/*/variant.json", "*/variant.json"):
            found = sorted(p.glob(pattern))
            if found:
                return found
        raise BadVariantFile(f"{p} holds no variant.json (looked for variants/*/variant.json and */variant.json)")
    if not p.exists():
        raise BadVariantFile(f"{p} does not exist")
    if p.suffix == ".json":
        return [p]
    lines = [ln.split("#", 1)[0].strip() for ln in p.read_text(encoding="utf-8").splitlines()]
    files = [Path(ln) if Path(ln).is_absolute() else p.parent / ln for ln in lines if ln]
    if not files:
        raise BadVariantFile(f"list file {p} names no variant.json")
    return files


def _bad_file(results: list[dict[str, Any]], path: str | Path, e: BadVariantFile) -> int:
    say(e.line())
    results.append({"variant": None, "path": str(path), "verdict": "error", "code": e.code, "messages": [str(e)]})
    return errors.BAD_VARIANT_FILE


def validate_all(sources: list[str | Path], out_dir: str | Path) -> int:
    """Validate every variant of ``sources`` into ``out_dir``; returns the exit code (module docstring)."""
    from experiments.payload.bridge_api import load_bridge
    from experiments.payload.validate import validate

    out = Path(out_dir)
    results: list[dict[str, Any]] = []
    code = errors.OK
    files: list[Path] = []
    written: list[str] = []
    for src in sources:
        try:
            files += find_variant_files(src)
        except BadVariantFile as e:
            code = _bad_file(results, src, e)
    try:
        load_core()
    except CoreMissing as e:
        say(e.line())
        return e.code
    api, why = None, None
    try:
        api = load_bridge()
        say(f"[payload] Megatron-Bridge {api.version}: Bridge + Core checks")
    except BridgeMissing as e:
        why = str(e).split(";")[0]
        say(f"[payload] {why}: Megatron-Core checks only")
    for path in files:
        try:
            spec = load_variant(path).with_overrides(mode="validate")
        except BadVariantFile as e:
            code = _bad_file(results, path, e)
            continue
        try:
            v = validate(spec, api, why_no_bridge=why)
            doc, verdict, rc = v.doc, v.verdict, errors.OK if v.verdict == "pass" else errors.CHECK_FAILED
            lines = loud(spec, v)
        except PayloadError as e:
            doc, verdict, rc, lines = error_document(spec, e), "error", e.code, []
        folder = spec.name
        if folder in written:  # two files name the same variant: keep both documents
            folder = f"{spec.name}~{written.count(spec.name) + 1}"
            say(f"[payload] warning: variant name {spec.name} repeats ({path}); writing {folder}/")
        written.append(spec.name)
        write_atomic(out / folder / EFFECTIVE_FILE, doc)
        msgs = doc["checks"]["messages"]
        say(f"[payload] validate {spec.name}: {verdict}" + (f" ({msgs[0]})" if verdict == "error" else ""))
        for line in lines:
            say(line)
        results.append({"variant": spec.name, "folder": folder, "path": str(path), "verdict": verdict, "code": rc,
                        "messages": msgs})
        if rc != errors.OK and code == errors.OK:
            code = errors.CHECK_FAILED
    write_atomic(out / SUMMARY_FILE, {"schema_version": 1, "results": results})
    say(f"[payload] validate_all: {sum(r['verdict'] == 'pass' for r in results)}/{len(results)} passed; exit {code}")
    return code


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.payload.validate_all",
                                description="Validate many variant.json files in one process (preflight=container).")
    p.add_argument("sources", nargs="+", help="sweep folder, variants folder, variant.json, or a list file")
    p.add_argument("out_dir", help="writes <out_dir>/<variant>/effective_config.json and validate_all.json")
    a = p.parse_args(argv)
    return validate_all(a.sources, a.out_dir)


if __name__ == "__main__":
    sys.exit(main())
