"""The reason vocabulary is the code's (``analysis.judge.vocabulary``): every reason the verdict can give is in it,
and docs/CONTRACTS.md §4 and docs/REPORT.md list exactly it, so that code and contract cannot drift apart."""

from __future__ import annotations

import ast
import html
import re
from pathlib import Path

from analysis.judge import vocabulary
from analysis.judge.classify import EVIDENCE_ONLY, PRIORITY
from analysis.logs import catalogue
from tests.docs.test_citations import _section

REPO = Path(__file__).resolve().parents[2]


def _contract_reasons() -> list[str]:
    text = _section(*"CONTRACTS.md §4".split(" §"))  # the reasons between its markers
    block = text.split("<!-- reasons -->", 1)[1].split("<!-- /reasons -->", 1)[0]
    return re.findall(r"`([a-z_]+(?::<SIG>)?)`", block)


def _report_reasons() -> set[str]:
    text = (REPO / "docs" / "REPORT.md").read_text()
    table = text.split("| reason | status | meaning |", 1)[1].split("\n\n", 1)[0]
    out = set()
    for row in table.splitlines()[2:]:
        out.update(html.unescape(r.strip()) for r in row.split("|")[1].split(","))
    return out


def test_the_contract_lists_the_vocabulary_in_its_order():
    assert _contract_reasons() == list(vocabulary())


def test_the_report_guide_lists_every_reason_once():
    assert _report_reasons() == set(vocabulary())


def test_every_reason_the_verdict_names_is_in_the_vocabulary():
    """Reasons written as literals where the verdict is built, the catalogue's reasons (other than evidence-only
    findings) and the priority order are all in the vocabulary."""
    words = set(vocabulary()) | {"killed_by_signal"}
    tree = ast.parse((REPO / "analysis" / "judge" / "classify.py").read_text())
    named = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("Verdict", "verdict") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value:
            named.add(node.args[1].value)
    assert named and named <= words, named - words
    assert set(catalogue.REASONS) - EVIDENCE_ONLY <= words, set(catalogue.REASONS) - EVIDENCE_ONLY - words
    assert {r for r in PRIORITY if not r.startswith("_")} <= words


def test_the_check_sees_a_reason_the_contract_lacks():
    """The contract test can fail: a vocabulary with one reason more than the contract differs from it."""
    assert _contract_reasons() != [*vocabulary(), "a_new_reason"]
