"""The cluster's Slurm timeouts (KillWait, SlurmdTimeout, GraceTime): the parsers of scontrol/sacctmgr output, a
shell that cannot answer, the conductor's one read per sweep into the attempts, and the real local cluster."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

import launchers.slurm_timeouts as st
from analysis.api import Options, report_sweep
from contracts.manifest import Manifest, ManifestWriter
from experiments.conductor.accounting import record_slurm_timeouts
from launchers.errors import SchedulerError
from launchers.shell import Result, local_shell
from tests.experiments.conductor.test_gpu_hours_report import _sweep
from tests.launchers.conftest import IN_CI

CONFIG = """Configuration data as of 2026-12-06T07:00:00
AccountingStorageType   = accounting_storage/slurmdbd
KillOnBadExit           = 0
KillWait                = 45 sec
SlurmdTimeout           = 600 sec
SlurmctldTimeout        = 120 sec
"""
PARTITIONS = """PartitionName=batch
   AllocNodes=ALL Default=NO QoS=N/A
   DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=30 Hidden=NO

PartitionName=gpu
   AllocNodes=ALL Default=YES QoS=N/A
   DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=120 Hidden=NO
"""


def test_parsers_read_slurms_own_formats():
    assert st.parse_config(CONFIG) == {"kill_wait_s": 45.0, "slurmd_timeout_s": 600.0}
    assert st.parse_partition_grace(PARTITIONS.split("\n\n")[0]) == 30.0
    assert st.parse_partition_grace("PartitionName=x\n   Nodes=n1") is None
    qos = "normal|00:00:00\nlow|00:05:00\nscavenger|1-00:00:10\nodd|soon\n"
    assert st.parse_qos_grace(qos, "low") == 300.0
    assert st.parse_qos_grace(qos, "scavenger") == 86410.0
    assert st.parse_qos_grace(qos, "odd") is None and st.parse_qos_grace(qos, "absent") is None


def test_read_takes_the_default_partition_and_the_larger_grace():
    asked = []

    def shell(argv, timeout_s=60):
        asked.append(argv)
        out = {"config": CONFIG, "partition": PARTITIONS, "qos": "normal|00:00:00\nlow|00:10:00\n"}[argv[2] if
                                                                                                   argv[0] == "scontrol" else "qos"]
        return Result(0, out, "")

    assert st.read_timeouts(shell) == {"kill_wait_s": 45.0, "slurmd_timeout_s": 600.0, "grace_time_s": 120.0,
                                       "note": "read from the cluster"}
    assert st.read_timeouts(shell, "gpu", "low")["grace_time_s"] == 600.0  # the QOS's 10 min beats the partition's
    assert len(asked) == 2 + 3


def test_a_cluster_without_scontrol_gives_unknowns_and_says_why():
    def shell(argv, timeout_s=60):
        raise SchedulerError(f"{argv[0]} is not on PATH")

    t = st.read_timeouts(shell, "gpu")
    assert [t[k] for k in st.KEYS] == [None, None, None]
    assert "not read: kill_wait_s, slurmd_timeout_s, grace_time_s" in t["note"] and "not on PATH" in t["note"]


def _net_fail_log(folder: Path) -> None:
    lines = [f"0: [2026-03-09 22:40:{i:02d}] iteration {i}/ 2000 | consumed samples: {i * 8} | elapsed time per "
             f"iteration (ms): 700.0 | learning rate: 1.0E-04 | global batch size: 8 | lm loss: 9.0E+00 | "
             "loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations: 0 | number of nan iterations: 0 |"
             for i in range(1, 55)]
    lines += ["2: [E309 22:41:00.000000 311 ProcessGroupNCCL.cpp:1830] [Rank 2] Process group watchdog thread "
              "terminated with exception: NCCL error: remote process exited or there was a network error",
              "slurmstepd: error: *** STEP 600.0 ON gpu-s02 CANCELLED AT 2026-03-09T22:48:30 DUE TO NODE FAIL ***"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stdout.log").write_text("\n".join(lines) + "\n")


def test_the_conductor_reads_once_per_sweep_and_the_report_uses_the_values(tmp_path, monkeypatch):
    sd, writer, refs = _sweep(tmp_path, "local_slurm")
    asked = []

    def read(shell, partition=None, qos=None):
        asked.append((partition, qos))
        return {"kill_wait_s": 30.0, "slurmd_timeout_s": 600.0, "grace_time_s": 0.0, "note": "read from the cluster"}

    monkeypatch.setattr(st, "read_timeouts", read)
    record_slurm_timeouts(SimpleNamespace(m=writer.m, writer=writer))
    assert asked == [("debug", None)]
    m = Manifest.load(sd)
    assert all(m.attempt(r).get("slurm_timeouts")["slurmd_timeout_s"] == 600.0 for r in refs)
    record_slurm_timeouts(SimpleNamespace(m=m, writer=ManifestWriter(sd, m)))
    assert len(asked) == 1  # recorded: not asked again
    # the failed run's network error came 450 s before the NODE FAIL line: within this cluster's SlurmdTimeout
    _net_fail_log(sd.attempt_dir(refs[1]) / "logs")
    report_sweep(sd.root, Options())
    run = next(r for r in json.loads(sd.summary_json.read_text())["runs"] if r["variant"] == refs[1].variant)
    assert run["reason"] == "node_failure", run["timeline"]
    assert run["timeline"]["slurm_timeouts"]["slurmd_timeout_s"] == {"value": 600.0, "source": "cluster"}


def test_a_local_sweep_asks_nothing(tmp_path, monkeypatch):
    sd, writer, refs = _sweep(tmp_path, "local")
    monkeypatch.setattr(st, "read_timeouts", lambda *a, **k: (_ for _ in ()).throw(AssertionError("asked")))
    record_slurm_timeouts(SimpleNamespace(m=writer.m, writer=writer))
    assert all(Manifest.load(sd).attempt(r).get("slurm_timeouts") is None for r in refs)


def _conf_value(conf: str, key: str, default: float) -> float:
    m = re.search(rf"^\s*{key}\s*=\s*(\d+)\s*$", conf, re.M | re.I)
    return float(m.group(1)) if m else default


@pytest.mark.slurm
def test_the_real_cluster_gives_its_configured_values(tmp_path):
    if shutil.which("scontrol") is None:
        why = "no local Slurm (bash scripts/slurm_local/start.sh)"
        if IN_CI:
            pytest.fail(why)
        pytest.skip(why)
    shown = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    conf = Path(re.search(r"^SLURM_CONF\s*=\s*(\S+)", shown, re.M).group(1)).read_text()
    part = re.search(r"^PartitionName=debug\b.*$", conf, re.M).group(0)
    grace = re.search(r"\bGraceTime=(\d+)", part)
    want = {"kill_wait_s": _conf_value(conf, "KillWait", 30.0),  # slurm.conf(5) defaults when the file is silent
            "slurmd_timeout_s": _conf_value(conf, "SlurmdTimeout", 300.0),
            "grace_time_s": float(grace.group(1)) if grace else 0.0}
    got = st.read_timeouts(local_shell, "debug")
    assert {k: got[k] for k in st.KEYS} == want and got["note"] == "read from the cluster"
    assert want["kill_wait_s"] != 30.0  # the local cluster sets KillWait: the value is read, not the default
    # through the conductor, with the sweep's own partition (conf/cluster/local_slurm.yaml)
    sd, writer, refs = _sweep(tmp_path, "local_slurm")
    record_slurm_timeouts(SimpleNamespace(m=writer.m, writer=writer))
    recorded = Manifest.load(sd).attempt(refs[0]).get("slurm_timeouts")
    assert {k: recorded[k] for k in st.KEYS} == want
