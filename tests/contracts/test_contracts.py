"""The ground floor: Slurm time forms and states, exit codes, secrets, the atomic writer, the typed manifest."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from contracts.atomic import write_json, write_text
from contracts.errors import ConfigError, ManifestError, SweepExistsError
from contracts.exits import ExitCode, combine
from contracts.manifest import Manifest
from contracts.records import RunRef
from contracts.secrets import mask_config, mask_override, mask_text
from contracts.slurm import format_time_limit, manifest_status, parse_time_limit
from contracts.statuses import ManifestStatus, RunOutcome
from contracts.sweepdir import SweepDir

REPO = Path(__file__).resolve().parents[2]
FIXTURES = [REPO / "tests/e2e/fixtures/h200_sweep/tiny_isolation/manifest.json",
            REPO / "tests/e2e/fixtures/h200_sweep/tiny_forced/manifest.json",
            REPO / "tests/analysis/history/fixtures/sweep_nightly/manifest.json"]


@pytest.mark.parametrize("text,seconds", [
    ("30", 1800), (30, 1800), ("30:15", 1815), ("1:00:00", 3600), ("00:45:00", 2700), ("1-12", 129600),
    ("1-12:30", 131400), ("1-00:00:10", 86410), ("2-0", 172800), ("90", 5400),
])
def test_slurm_time_forms_mean_what_sbatch_means(text, seconds) -> None:
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["99:99:99", "1:60", "1-24", "abc", "0", "00:00:00", "-5", "1-", "1:2:3:4", "", True])
def test_malformed_time_limits_name_slurms_forms(text) -> None:
    with pytest.raises(ConfigError, match=r"MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS"):
        parse_time_limit(text)


def test_time_limit_round_trips_through_the_sbatch_form() -> None:
    for s in (60, 1815, 86410, 129600):
        assert parse_time_limit(format_time_limit(s)) == s


def test_one_state_map_for_every_stage() -> None:
    assert manifest_status("CANCELLED by 0") == ManifestStatus.CANCELLED
    assert manifest_status("PREEMPTED") == ManifestStatus.FAILED  # not a user's cancel
    assert manifest_status("REQUEUED") == ManifestStatus.SUBMITTED
    assert manifest_status("TIMEOUT") == manifest_status("DEADLINE") == ManifestStatus.TIMEOUT
    assert manifest_status("COMPLETED+") == ManifestStatus.SUCCEEDED
    assert manifest_status("NOT_A_STATE") == ManifestStatus.LOST


def test_statuses_serialise_to_todays_strings() -> None:
    assert json.dumps({"s": ManifestStatus.FAILED, "o": RunOutcome.OK_WITH_WARNING}) == \
        '{"s": "failed", "o": "ok_with_warning"}'


def test_exit_codes_combine_most_actionable_first() -> None:
    assert combine(0, 4, 3, 5) == ExitCode.RUN_FAILED
    assert combine(4, 5) == ExitCode.INFRA and combine(0, 4) == ExitCode.REGRESSION and combine() == ExitCode.OK
    with pytest.raises(ValueError):
        combine(42)


def test_secrets_are_masked_but_switches_stay() -> None:
    assert mask_override("+cluster.env_vars.HF_TOKEN=abc") == "+cluster.env_vars.HF_TOKEN=***"
    assert mask_override("cluster.allow_ssh_secrets=true") == "cluster.allow_ssh_secrets=true"
    cfg = mask_config({"env_vars": {"WANDB_API_KEY": "k1", "TAG": "x"}, "allow_ssh_secrets": True})
    assert cfg == {"env_vars": {"WANDB_API_KEY": "***", "TAG": "x"}, "allow_ssh_secrets": True}
    assert mask_text("export A='s e c r e t'; echo s e c r e t", ["s e c r e t"]) == "export A=***; echo ***"


def test_atomic_writer_follows_the_umask(tmp_path: Path) -> None:
    code = ("import os, sys; os.umask(0o027); from contracts.atomic import write_text; "
            "write_text(sys.argv[1], 'x')")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.txt")], check=True, cwd=REPO,
                   env={**os.environ, "PYTHONPATH": str(REPO)})
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o640
    write_text(tmp_path / "b" / "c.txt", "y")
    assert (tmp_path / "b" / "c.txt").read_text() == "y" and not list((tmp_path / "b").glob(".*tmp"))


@pytest.mark.parametrize("path", FIXTURES[:2], ids=lambda p: p.parent.name)
def test_manifest_round_trips_without_changing_the_schema(path: Path) -> None:
    """Manifests the planner wrote (on the H200) come back byte-for-byte the same JSON."""
    data = json.loads(path.read_text())
    assert Manifest.from_json(data).to_json() == data


def _contains(big, small) -> bool:
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and _contains(big[k], v) for k, v in small.items())
    if isinstance(small, list):
        return isinstance(big, list) and len(big) == len(small) and all(map(_contains, big, small))
    return big == small


def test_a_hand_written_manifest_keeps_every_field_it_had() -> None:
    data = json.loads(FIXTURES[2].read_text())
    out = Manifest.from_json(data).to_json()
    assert _contains(out, data) and out != data  # defaults are added, nothing is dropped or changed


def test_manifest_create_is_exclusive_and_update_is_locked(tmp_path: Path) -> None:
    sd = SweepDir(tmp_path / "s")
    m = Manifest.from_json(json.loads(FIXTURES[0].read_text()))
    m.create(sd)
    with pytest.raises(SweepExistsError, match=f"sweep_id={m.sweep_id}"):
        m.create(sd)
    name = m.variants[0].name

    def add(mm: Manifest) -> RunRef:
        return mm.variant(name).new_attempt(0).ref(name)

    _, ref = Manifest.update(sd, add)
    assert ref.attempt == max(a.attempt for a in m.variants[0].attempts) + 1
    again = Manifest.load(sd)
    again.attempt(ref).set(status="timeout")
    again.attempt(ref).set(status="running")  # a final status sticks
    assert again.attempt(ref).status == ManifestStatus.TIMEOUT and again.attempt(ref).finished


def test_a_truncated_manifest_names_the_file_and_the_way_out(tmp_path: Path) -> None:
    sd = SweepDir(tmp_path)
    write_text(sd.manifest, '{"schema_version": 1, "sweep_id": "x", "variants": [')
    with pytest.raises(ManifestError, match=r"manifest.json cannot be read .*Restore it from a backup"):
        Manifest.load(sd)
    write_json(sd.manifest, {"schema_version": 2})
    with pytest.raises(ManifestError, match="schema_version 2"):
        Manifest.load(sd)
