"""The signature catalogue (``analysis.logs.signatures``) compiled: one RE2 set pass per candidate line, first entry wins.

``match(text)`` returns the first catalogue entry (in ``SIGNATURES`` order) whose pattern matches the line and the
Python ``re`` match of it (for its named groups); ``details(entry, match)`` turns the named groups into run
details (numbers as int, the signal as its ``SIG*`` name). ``family_of(reason)`` and ``retriable(reason)`` give the
family of a reason and its retriable flag (``FAMILIES``).
"""

from __future__ import annotations

import re
import signal as _signal
from dataclasses import dataclass
from typing import Any

import re2

from analysis.logs.signatures import FAMILIES, SIGNATURES

# srun / bash / faulthandler words for a signal -> its name (strsignal(3) texts on Linux)
SIGNAL_WORDS = {
    "segmentation fault": "SIGSEGV", "aborted": "SIGABRT", "bus error": "SIGBUS", "killed": "SIGKILL",
    "terminated": "SIGTERM", "floating point exception": "SIGFPE", "illegal instruction": "SIGILL",
}
_INT_FIELDS = frozenset({"seq", "timeout_ms", "ran_for_ms", "exit_code", "xid", "signum", "stuck_s", "tokens"})


@dataclass(frozen=True, slots=True)
class Signature:
    """One catalogue entry: ``index`` is its position in ``SIGNATURES`` (lower wins)."""

    index: int
    family: str
    reason: str
    triggers: tuple[str, ...]
    pattern: re.Pattern[str]
    source: str


ENTRIES: tuple[Signature, ...] = tuple(
    Signature(i, fam, reason, triggers, re.compile(pattern), source)
    for i, (fam, reason, triggers, pattern, source) in enumerate(SIGNATURES)
)
TRIGGERS: tuple[str, ...] = tuple(sorted({t for e in ENTRIES for t in e.triggers}))
# one pass over a lower-cased line: does it hold any trigger (then the RE2 set runs)
TRIGGER_RE = re2.compile("|".join(re.escape(t) for t in sorted(TRIGGERS, key=len, reverse=True)))
REASON_FAMILY: dict[str, str] = {}
for _e in ENTRIES:
    REASON_FAMILY.setdefault(_e.reason, _e.family)
REASONS = frozenset(REASON_FAMILY)

_SET = re2.Set.SearchSet()
for _e in ENTRIES:
    _SET.Add(_e.pattern.pattern)
_SET.Compile()


def family_of(reason: str | None) -> str | None:
    """The catalogue family of a reason (``killed_by_signal:SIGSEGV`` -> ``signal``); None outside the catalogue."""
    if reason is None:
        return None
    return REASON_FAMILY.get(reason.split(":", 1)[0])


def retriable(reason: str | None) -> bool:
    """True when the reason's family is worth retrying (network, dispatcher timeout, hardware, preemption)."""
    fam = family_of(reason)
    return bool(fam and FAMILIES[fam]["retriable"])


def match(text: str) -> tuple[Signature, re.Match[str]] | None:
    """The first catalogue entry matching ``text`` and its match, or None (one RE2 set pass over the line)."""
    try:
        hits = _SET.Match(text)
    except UnicodeError:  # a lone surrogate: match what can be encoded
        hits = _SET.Match(text.encode("utf-8", "replace").decode("utf-8"))
    for i in sorted(hits or ()):
        m = ENTRIES[i].pattern.search(text)
        if m is not None:
            return ENTRIES[i], m
    return None


def signal_name(value: str | int | None) -> str | None:
    """``11`` / ``-11`` / ``"SIGSEGV"`` / ``"Segmentation fault"`` -> ``"SIGSEGV"``; None when unknown."""
    if value is None:
        return None
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        try:
            return _signal.Signals(abs(int(text))).name
        except ValueError:
            return f"SIG{abs(int(text))}"
    if text.upper().startswith("SIG"):
        return text.upper().removeprefix("SIGNALS.")
    return SIGNAL_WORDS.get(text.lower())


def details(entry: Signature, m: re.Match[str]) -> dict[str, Any]:
    """The named groups of a match as details: ``name2``/``name3`` alternatives fold into ``name``, numbers become
    int, and any signal group becomes ``signal`` (its ``SIG*`` name). ``entry`` is the matched entry (its family
    and source are the catalogue's, not the run's)."""
    out: dict[str, Any] = {}
    for name, value in m.groupdict().items():
        if value is None:
            continue
        key = name.rstrip("0123456789")
        out.setdefault(key, int(value) if key in _INT_FIELDS and value.isdigit() else value.strip())
    sig = out.pop("signal_word", None) or out.get("signal") or out.get("signum")
    if sig is not None:
        out["signal"] = signal_name(sig)
    return out
