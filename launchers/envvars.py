"""Environment variables of a job: secrets apart, shell quoting, masking.

Secrets (CONTRACTS §10): a variable whose name contains ``TOKEN``, ``KEY``, ``SECRET`` or ``PASSWORD``, or that is
listed in ``cluster.secret_env``. Their values are never written into a script or a file this tool writes; they
reach the job through sbatch's export of the submitting environment (``--export=ALL``, sbatch's default).

Quoting (CASES C11, NeMo-Run PR 556): NeMo-Run 0.11.1 writes ``executor.env_vars`` as ``export K=V`` without
quoting, and its srun argument quoting is a no-op (``noquote`` is an alias of ``str``, so
``isinstance(arg, noquote)`` is always true). Values and arguments are therefore quoted here, once, with
``shlex.quote``; they are literal strings in the job (``$VAR`` in a value is not expanded).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contracts.cluster import ClusterConfig
from contracts.secrets import MASK, is_secret, mask_text

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class JobEnv:
    """The environment of one job, split by what may be written down.

    ``plain``: name -> value, written into the job script (``export NAME='value'``).
    ``secrets``: name -> value for secrets whose value the profile or the caller gives; they travel only in the
    submitting process's environment. ``passthrough``: names of secrets to take from the submitting environment
    as they are (``cluster.secret_env`` names that are set there).
    """

    plain: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    passthrough: tuple[str, ...] = ()

    @property
    def secret_names(self) -> tuple[str, ...]:
        """Every secret name the job gets, sorted."""
        return tuple(sorted(set(self.secrets) | set(self.passthrough)))

    def secret_values(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """The secret values to mask in any text this tool writes (longest first, empty values skipped)."""
        environ = os.environ if environ is None else environ
        values = set(self.secrets.values()) | {environ[n] for n in self.passthrough if n in environ}
        return sorted((v for v in values if v), key=len, reverse=True)

    def masked(self) -> dict[str, str]:
        """``plain`` plus every secret name with the value ``***`` (what variant.json and reports show)."""
        out = dict(self.plain)
        out.update({name: MASK for name in self.secret_names})
        return dict(sorted(out.items()))


def job_env(
    env_vars: Mapping[str, Any] | None,
    secret_env: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> JobEnv:
    """Split a profile's ``env_vars`` (plus the names in ``secret_env``) into a :class:`JobEnv`.

    Values are turned into strings (booleans as ``0``/``1`` are left to the profile: YAML gives strings there).
    Raises ``ValueError`` for a name that is not a shell variable name (it could not be exported).
    """
    environ = os.environ if environ is None else environ
    secret_env = tuple(secret_env)
    plain: dict[str, str] = {}
    secrets: dict[str, str] = {}
    for name, value in (env_vars or {}).items():
        if not _NAME.match(str(name)):
            raise ValueError(f"env var name {name!r} is not a valid shell variable name ([A-Za-z_][A-Za-z0-9_]*)")
        text = "" if value is None else str(value)
        (secrets if is_secret(name, secret_env) else plain)[str(name)] = text
    passthrough = tuple(sorted(n for n in secret_env if n not in secrets and n in environ))
    return JobEnv(plain=plain, secrets=secrets, passthrough=passthrough)


def cluster_env(cluster: ClusterConfig) -> JobEnv:
    """The :class:`JobEnv` of a cluster profile: its ``env_vars`` and ``secret_env`` (CONTRACTS §9, §10)."""
    return job_env(cluster.env_vars, cluster.secret_env)


def quoted_env(plain: Mapping[str, str]) -> dict[str, str]:
    """Values shell-quoted for NeMo-Run's unquoted ``export K=V`` lines (``a b`` -> ``'a b'``)."""
    return {name: shlex.quote(value) for name, value in plain.items()}


def quote_args(args: Iterable[Any]) -> list[str]:
    """Each argument shell-quoted so that it stays one word in the generated script."""
    return [shlex.quote(str(a)) for a in args]


__all__ = ["MASK", "JobEnv", "cluster_env", "is_secret", "job_env", "mask_text", "quote_args", "quoted_env"]
