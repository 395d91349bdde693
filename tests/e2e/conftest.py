"""Fixtures of the end-to-end tests: the real local Slurm cluster (started when it is not up)."""

from tests.launchers.conftest import slurm_cluster  # noqa: F401  (re-exported fixture)
