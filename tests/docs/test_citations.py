"""Every "CONTRACTS §N", "FACTS §N" and "CASES Cnn" cited in the repository resolves to a heading in docs/.

Also: nothing points at the builders' shared folder; every top-level key of conf/config.yaml is documented in
docs/CONTRACTS.md §1; every exit code declared in the code appears in docs/CONTRACTS.md §5; every test that
docs/CASES.md names exists.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SKIP_DIRS = {".venv", ".git", "results", "__pycache__", "node_modules", ".pytest_cache", ".ruff_cache"}
SUFFIXES = {".py", ".md", ".sh", ".yaml", ".yml"}
SELF = Path(__file__).resolve()

# A citation: the document name, an optional ".md", then one or more section or case ids, separated by
# commas, "and", "or", or written as ranges ("§1-§3", "C03-C10"). A trailing period ("§7.") is not part of the id.
_ID = r"(?:§\s?\d+(?:\.\d+)*|C\d\d)"
_SEP = r"(?:\s*(?:,|;|/|and|or|&)?\s*)"
_RANGE = r"(?:\s*[-–]\s*(?:§\s?)?C?\d+)?"
CITATION = re.compile(rf"\b(?P<doc>CONTRACTS|FACTS|CASES)(?:\.md)?\s*(?P<ids>{_ID}{_RANGE}(?:{_SEP}{_ID}{_RANGE})*)")
NAME = re.compile(r"(?<![/\w])(?P<doc>CONTRACTS|FACTS|CASES)\b")
CITED_AFTER = re.compile(r"(?:\.md)?\s*(?:§|C\d\d|Cnn\b)")  # "Cnn" and "§N" are placeholders in prose
MISSING_DOCS = re.compile(r"\b(?:ARCHITECTURE|STYLE|SLURM_LOCAL)(?:\.md\b|\s*§)")
SHARED = ("../shared", "/work/shared")


def repo_files() -> list[Path]:
    """Every text file the citation rules apply to (code, docs, scripts, config), this test file excluded."""
    out = []
    for p in ROOT.rglob("*"):
        rel = p.relative_to(ROOT)
        if any(part in SKIP_DIRS for part in rel.parts) or not p.is_file() or p.resolve() == SELF:
            continue
        if p.suffix in SUFFIXES or rel.as_posix() == ".ci/run":
            out.append(p)
    return sorted(out)


def headings() -> dict[str, set[str]]:
    """Section ids per document: {"CONTRACTS": {"1", ..., "5.1"}, "FACTS": {...}, "CASES": {"C01", ...}}."""
    out: dict[str, set[str]] = {}
    for doc in ("CONTRACTS", "FACTS", "CASES"):
        ids: set[str] = set()
        for line in (DOCS / f"{doc}.md").read_text().splitlines():
            m = re.match(r"^#{1,6}\s+(?:§(\d+(?:\.\d+)*)|(C\d\d))\b", line)
            if m:
                ids.add(m.group(1) or m.group(2))
        out[doc] = ids
    return out


def cited_ids(doc: str, ids: str) -> list[str]:
    """The ids of one citation, ranges expanded: ("CONTRACTS", "§1-§3") -> ["1", "2", "3"]."""
    out: list[str] = []
    if doc == "CASES":
        for a, b in re.findall(r"C(\d\d)(?:\s*[-–]\s*C?(\d\d))?", ids):
            out += [f"C{i:02d}" for i in range(int(a), int(b or a) + 1)]
        return out
    for a, b in re.findall(r"§\s?(\d+(?:\.\d+)*)(?:\s*[-–]\s*§?\s?(\d+))?", ids):
        if b:
            out += [str(i) for i in range(int(a.split(".")[0]), int(b) + 1)]
        else:
            out.append(a)
    return out


def broken_citations(files: list[Path]) -> list[str]:
    """``path:line: text`` for every citation that does not resolve, every bare one, and every missing doc."""
    known = headings()
    bad = []
    for p in files:
        rel = p.relative_to(ROOT).as_posix()
        try:
            text = p.read_text()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for m in CITATION.finditer(line):
                missing = [i for i in cited_ids(m.group("doc"), m.group("ids")) if i not in known[m.group("doc")]]
                if missing:
                    bad.append(f"{rel}:{n}: {m.group(0)!r} cites {', '.join(missing)}, not a heading in "
                               f"docs/{m.group('doc')}.md")
            if not rel.startswith("docs/"):
                for m in NAME.finditer(line):
                    if CITED_AFTER.match(line, m.end()):
                        continue
                    bad.append(f"{rel}:{n}: bare {m.group(0)!r}: cite a section (§N) or case (Cnn), or link docs/")
            for m in MISSING_DOCS.finditer(line):
                bad.append(f"{rel}:{n}: {m.group(0)!r} names a document that is not in docs/")
    return bad


@pytest.mark.slow
def test_every_citation_resolves_to_a_heading():
    files = repo_files()
    assert len(files) > 50, "the scan found too few files: is ROOT right?"
    bad = broken_citations(files)
    assert not bad, "citations that do not resolve:\n" + "\n".join(bad)


def test_a_broken_citation_is_caught(tmp_path):
    """The checker itself can fail: a wrong section, a range past the end, a bare name and a missing case."""
    probe = tmp_path / "probe.py"
    probe.write_text("# see CONTRACTS §99\n# FACTS.md §1-§42.\n# the CONTRACTS say so\n# CASES C77\n"
                     "# fine: CONTRACTS §3, FACTS §7. CASES C01-C12\n")
    original = ROOT
    try:
        globals()["ROOT"] = tmp_path
        bad = broken_citations([probe])
    finally:
        globals()["ROOT"] = original
    assert [b.split(":")[1] for b in bad] == ["1", "2", "3", "4"], bad


@pytest.mark.slow
@pytest.mark.parametrize("needle", SHARED)
def test_nothing_points_at_the_shared_folder(needle):
    hits = [p.relative_to(ROOT).as_posix() for p in repo_files() if needle in p.read_text(errors="replace")]
    assert not hits, f"{needle} is mentioned in: {', '.join(hits)}"


def _section(doc: str, number: str) -> str:
    """The text of ``## §number`` up to the next level-2 heading."""
    text = (DOCS / doc).read_text()
    m = re.search(rf"^## §{re.escape(number)} .*?(?=^## |\Z)", text, re.M | re.S)
    assert m, f"docs/{doc} has no '## §{number}' heading"
    return m.group(0)


def test_every_top_level_config_key_is_in_contracts_section_1():
    cfg = yaml.safe_load((ROOT / "conf" / "config.yaml").read_text())
    section = _section("CONTRACTS.md", "1")
    keys = [k for k in cfg if k != "defaults"]
    missing = [k for k in keys if f"`{k}`" not in section]
    assert not missing, f"conf/config.yaml keys missing from docs/CONTRACTS.md §1: {missing}"
    subkeys = [f"{k}.{s}" for k, v in cfg.items() if isinstance(v, dict) for s in v]
    missing = [k for k in subkeys if f"`{k}`" not in section and k.split(".")[1] not in section]
    assert not missing, f"conf/config.yaml sub-keys missing from docs/CONTRACTS.md §1: {missing}"


def declared_exit_codes() -> dict[int, list[str]]:
    """Exit codes declared in the code (tests excluded), with where: ``EXIT_*`` constants, ``exit_code = N``
    class attributes, ``IntEnum`` classes named ``*Exit*``, and the keys of ``EXIT_CODES`` tables."""
    found: dict[int, list[str]] = {}

    def add(value: object, where: str) -> None:
        if isinstance(value, int) and not isinstance(value, bool):
            found.setdefault(value, []).append(where)

    for p in repo_files():
        rel = p.relative_to(ROOT).as_posix()
        if p.suffix != ".py" or rel.startswith(("tests/", "benchmarks/")):
            continue
        tree = ast.parse(p.read_text())
        ints = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    names = t.elts if isinstance(t, ast.Tuple) else [t]
                    values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                    for name, value in zip(names, values, strict=False):
                        if not isinstance(name, ast.Name) or not isinstance(value, ast.Constant):
                            continue
                        if name.id.startswith("EXIT_") or name.id == "exit_code":
                            add(value.value, f"{rel}:{name.id}")
                    if isinstance(t, ast.Name) and t.id == "EXIT_CODES" and isinstance(node.value, ast.Dict):
                        for k in node.value.keys:
                            add(ints.get(k.id) if isinstance(k, ast.Name) else getattr(k, "value", None),
                                f"{rel}:EXIT_CODES")
            if isinstance(node, ast.ClassDef) and "Exit" in node.name and any(
                    getattr(b, "id", getattr(b, "attr", "")) == "IntEnum" for b in node.bases):
                for item in node.body:
                    if isinstance(item, ast.Assign) and isinstance(item.value, ast.Constant):
                        add(item.value.value, f"{rel}:{node.name}")
    return found


@pytest.mark.slow
def test_every_exit_code_in_the_code_is_in_contracts_section_5():
    codes = declared_exit_codes()
    assert {0, 2, 3, 4, 5, 130} <= set(codes), f"the scan missed the sweep's exit codes: {sorted(codes)}"
    section = _section("CONTRACTS.md", "5")
    documented = {int(m) for m in re.findall(r"^\|\s*(\d+)\s*\|", section, re.M)}
    missing = {c: w for c, w in codes.items() if c not in documented}
    assert not missing, f"exit codes not in docs/CONTRACTS.md §5: {missing}"


def test_every_test_named_in_cases_exists():
    """docs/CASES.md names tests as `path::function` (or `::function` after a path): each must exist."""
    text = (DOCS / "CASES.md").read_text()
    missing, path = [], None
    for token in re.findall(r"`([^`]*::\w+)`", text):
        file, _, func = token.partition("::")
        path = ROOT / file if file else path
        assert path is not None, f"{token!r} has no file before it"
        if not path.exists() or not re.search(rf"^def {re.escape(func)}\(", path.read_text(), re.M):
            missing.append(f"{path.relative_to(ROOT)}::{func}")
    assert not missing, f"docs/CASES.md names tests that do not exist: {missing}"
    for case in (f"C{i:02d}" for i in range(1, 13)):
        assert re.search(rf"^### {case} ", text, re.M), f"docs/CASES.md has no heading for {case}"
