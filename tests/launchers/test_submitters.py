"""A dead conductor's sbatch children, found by the marker in their environment (launchers.procs)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from launchers.procs import SUBMITTER_ENV, submitter_marker, submitters, wait_for_submitters


def _child(marker: str, seconds: float) -> subprocess.Popen:
    env = dict(os.environ, **{SUBMITTER_ENV: marker})
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"], env=env)


def test_only_the_sweeps_own_submitters_are_found_and_waited_for(tmp_path):
    mine, other = submitter_marker(tmp_path / "a" / "nemo_run"), submitter_marker(tmp_path / "b" / "nemo_run")
    p, q = _child(mine, 1.5), _child(other, 30)
    try:
        time.sleep(0.3)
        assert submitters(mine) == [p.pid]
        t0 = time.monotonic()
        assert wait_for_submitters(mine, 20) == [p.pid]
        assert 0.5 < time.monotonic() - t0 < 15  # it waited for the child to end, not for the timeout
        assert p.poll() is not None or submitters(mine) == []
        assert q.poll() is None  # another sweep's submitter is left alone
    finally:
        q.kill()
        q.wait()
        p.wait()


def test_a_submitter_still_running_at_the_timeout_is_killed(tmp_path):
    mine = submitter_marker(tmp_path / "nemo_run")
    p = _child(mine, 60)
    time.sleep(0.3)
    assert wait_for_submitters(mine, 0.5) == [p.pid]
    assert p.wait(timeout=10) == -9
    assert submitters(mine) == []


def test_a_look_up_by_name_is_not_hidden_by_another_sweeps_newer_job_of_that_name(tmp_path):
    """Sweeps of the same variants use the same job names: the newest job of a name may be another sweep's."""
    from launchers.shell import Result
    from launchers.track import find_by_name

    mine, other = tmp_path / "s1", tmp_path / "s2"

    def shell(argv, timeout_s=60):
        if argv[0] == "sacct":
            return Result(0, f"12|moe.a.r0.a1|sbatch --requeue --parsable {mine}/nemo_run/x/a_sbatch.sh\n"
                             f"15|moe.a.r0.a1|sbatch --requeue --parsable {other}/nemo_run/x/a_sbatch.sh\n", "")
        return Result(0, f"16|moe.a.r0.a1|{other}/nemo_run/y/a_sbatch.sh\n", "")

    assert find_by_name(["moe.a.r0.a1"], shell, under=mine) == {"moe.a.r0.a1": ("12", f"{mine}/nemo_run/x/a_sbatch.sh")}
    assert find_by_name(["moe.a.r0.a1"], shell, under=tmp_path / "s3") == {}
    assert find_by_name(["moe.a.r0.a1"], shell)["moe.a.r0.a1"][0] == "16"
