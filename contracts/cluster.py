"""The typed cluster profile (conf/cluster/*.yaml, docs/CONTRACTS.md §9) that the planner builds and the launchers
take. ``time_limit`` keeps the user's text; :attr:`ClusterConfig.time_limit_s` is its one meaning in seconds."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from contracts.errors import ConfigError
from contracts.slurm import parse_time_limit
from contracts.statuses import Mode, values
from contracts.typed import build, one_of, positive

GPU_TYPES = ("h100", "h200", "b200", "b300", "gb200", "gb300", "a100")
EXECUTORS = ("local", "slurm")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# Environment variables whose value the library reads as a bounded whole number: (lowest, highest, source)
INTEGER_ENV: dict[str, tuple[int, int, str]] = {
    "CUDA_DEVICE_MAX_CONNECTIONS": (1, 32, "CUDA C++ Programming Guide, 'CUDA Environment Variables': 1 to 32, "
                                           "default 8"),
}


@dataclass(frozen=True, kw_only=True)
class TunnelConfig:
    """How the orchestrator reaches the cluster: ``local`` (on a login node) or ``ssh`` (key file, unattended)."""

    kind: str = "local"
    host: str | None = None
    port: int | None = None
    user: str | None = None
    identity: str | None = None
    job_dir: str | None = None

    def __post_init__(self) -> None:
        one_of("cluster.tunnel.kind", self.kind, ("local", "ssh"))
        if self.kind == "ssh" and not (self.host and self.user):
            raise ConfigError("cluster.tunnel.kind=ssh needs cluster.tunnel.host and cluster.tunnel.user")


@dataclass(frozen=True, kw_only=True)
class ClusterConfig:
    """Where and how jobs run (conf/cluster/*.yaml).

    ``time_limit``: a Slurm time limit in any of sbatch's forms (``30`` = 30 min, ``1-12`` = 36 h,
    ``00:45:00``); see :func:`contracts.slurm.parse_time_limit`. ``gpus_per_node``: a count or ``auto`` (local).

    Raises:
        ConfigError: a bad executor, count, GPU type, mode or time limit, more than one node on the local
            executor, or an :data:`INTEGER_ENV` variable out of its range (names the value and the valid ones).
    """

    name: str
    executor: str
    nodes: int = 1
    gpus_per_node: int | str = "auto"
    gpu_type: str | None = None
    container: str = "ci_cpu"
    account: str | None = None
    partition: str | None = None
    qos: str | None = None
    reservation: str | None = None
    constraint: str | None = None
    exclude: str | None = None
    exclusive: bool = False
    time_limit: str | int = "00:30:00"
    container_image: str | None = None
    container_mounts: tuple[str, ...] = ()
    container_env: tuple[str, ...] = ()
    env_vars: dict[str, Any] = field(default_factory=dict)
    secret_env: tuple[str, ...] = ()
    allow_ssh_secrets: bool = False  # CONTRACTS §10: an SSH tunnel would write secrets down; opt in explicitly
    tunnel: TunnelConfig = field(default_factory=TunnelConfig)
    mode: str | None = None
    # the bound a report measures against (analysis/measure/bound.py, CONTRACTS §9): GB/s per GPU in one direction
    nvlink_gbps: float | None = None  # NVLink within an NVLink domain (H100/H200 450, B200/GB200 900)
    nic_gbps: float | None = None  # the scale-out NIC per GPU (400 Gb/s ConnectX-7 = 50)
    nvlink_domain: int | None = None  # GPUs that share one NVLink domain; null = gpus_per_node (GB200 NVL72: 72)
    peak_tflops: float | None = None  # dense bf16 peak per GPU, TFLOP/s; null = conf/reference/gpu_peaks.yaml
    matmul_ceiling: float | str | None = None  # measured TFLOP/s, or the path of scripts/gpu/matmul_ceiling.py's JSON

    def __post_init__(self) -> None:
        one_of("cluster.executor", self.executor, EXECUTORS)
        for name in ("nvlink_gbps", "nic_gbps", "peak_tflops"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
                raise ConfigError(f"cluster.{name}={value!r} must be a positive number (null = unknown)")
        if self.nvlink_domain is not None:
            positive("cluster.nvlink_domain", self.nvlink_domain)
        m = self.matmul_ceiling
        if m is not None and (isinstance(m, bool) or not isinstance(m, int | float | str)
                              or (not isinstance(m, str) and m <= 0)):
            raise ConfigError(f"cluster.matmul_ceiling={m!r} must be TFLOP/s (a positive number), the path of a "
                              "matmul.json written by scripts/gpu/matmul_ceiling.py, or null")
        positive("cluster.nodes", self.nodes)
        if self.executor == "local" and self.nodes != 1:
            raise ConfigError(f"cluster.nodes={self.nodes} with cluster.executor=local: the local executor runs every "
                              "job on this one machine. Use cluster.nodes=1, or a Slurm profile for more nodes "
                              "(cluster=local_slurm, or your site's)")
        if isinstance(self.gpus_per_node, str) and self.gpus_per_node != "auto":
            raise ConfigError(f"cluster.gpus_per_node={self.gpus_per_node!r} must be a number or 'auto'")
        if isinstance(self.gpus_per_node, int):
            positive("cluster.gpus_per_node", self.gpus_per_node)
        if self.gpu_type not in (None, "auto"):
            one_of("cluster.gpu_type", self.gpu_type, GPU_TYPES + ("auto",))
        if self.mode is not None:
            one_of("cluster.mode", self.mode, values(Mode))
        if isinstance(self.time_limit, int):  # cluster.time_limit=30 on the command line: minutes, as sbatch
            object.__setattr__(self, "time_limit", str(self.time_limit))
        parse_time_limit(self.time_limit)  # validates the form
        self._no_line_breaks()
        for name, (low, high, source) in INTEGER_ENV.items():
            value = self.env_vars.get(name)
            if value is not None and not (str(value).strip().isdigit() and low <= int(value) <= high):
                raise ConfigError(f"cluster.env_vars.{name}={value!r} must be a whole number from {low} to {high} "
                                  f"({source})")
        for group, names in (("cluster.env_vars", self.env_vars), ("cluster.secret_env", self.secret_env),
                             ("cluster.container_env", self.container_env)):
            for name in names:
                if not _ENV_NAME.fullmatch(str(name)):
                    raise ConfigError(f"{group}: {str(name)!r} is not an environment variable name: a job could "
                                      "not export it. Use letters, digits and '_', not starting with a digit "
                                      "([A-Za-z_][A-Za-z0-9_]*)")

    def _no_line_breaks(self) -> None:
        """A line break in a field that reaches the job script (an ``#SBATCH`` line, the container flags, the
        tunnel's command line) would end that line and start another: refused, naming the field."""
        texts: list[tuple[str, Any]] = [(f"cluster.{f.name}", getattr(self, f.name)) for f in fields(self)
                                        if f.name not in ("env_vars", "tunnel")]
        texts += [(f"cluster.tunnel.{f.name}", getattr(self.tunnel, f.name)) for f in fields(self.tunnel)]
        for where, value in texts:
            for text in (value if isinstance(value, tuple | list) else (value,)):
                if isinstance(text, str) and any(c in text for c in "\n\r\0"):
                    raise ConfigError(f"{where}={text!r} holds a line break (or NUL): it would end its #SBATCH "
                                      "line and start another in the job script. Give it on one line")

    @property
    def time_limit_s(self) -> int:
        """``time_limit`` in seconds, as Slurm means it."""
        return parse_time_limit(self.time_limit)

    @property
    def is_local(self) -> bool:
        return self.executor == "local"

    @property
    def remote(self) -> bool:
        """True when squeue/sacct/sbatch run on the cluster through an SSH tunnel."""
        return self.tunnel.kind == "ssh"

    def to_json(self) -> dict[str, Any]:
        """The plain mapping recorded in manifest.json (``config.cluster``)."""
        from dataclasses import asdict

        d = asdict(self)
        for k in ("container_mounts", "container_env", "secret_env"):
            d[k] = list(d[k])
        return d

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str = "cluster") -> ClusterConfig:
        """Build the profile from a plain mapping with the field names of conf/cluster/*.yaml: a YAML profile, the
        composed ``cluster`` config, the manifest's ``config.cluster`` or a script's dict. ``tunnel`` may be a
        mapping (or a :class:`TunnelConfig`), lists become tuples and ``env_vars`` values text, as the planner does.

        Raises:
            ConfigError: an unknown key (names it, the closest spelling and every valid key), a value of the wrong
                type (names the field and the type it needs) or a bad value (see the class).
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} must be a mapping of the fields of conf/cluster/*.yaml, not "
                              f"{type(data).__name__}")
        raw = dict(data)
        tunnel = raw.get("tunnel")
        if not isinstance(tunnel, TunnelConfig):
            if tunnel is not None and not isinstance(tunnel, Mapping):
                raise ConfigError(f"{where}.tunnel={tunnel!r} must be a mapping with the keys "
                                  f"{', '.join(f.name for f in fields(TunnelConfig))}")
            raw["tunnel"] = build(TunnelConfig, dict(tunnel or {}), f"{where}.tunnel")
        env = raw.get("env_vars") or {}
        if not isinstance(env, Mapping):
            raise ConfigError(f"{where}.env_vars={env!r} must be a mapping of variable names to values")
        raw["env_vars"] = {str(k): str(v) for k, v in env.items()}
        return build(cls, raw, where)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterConfig:
        """Rebuild the profile from its manifest mapping (resume, collect, cancel), type-checked like the plan
        (:meth:`from_mapping`).

        Raises:
            ConfigError: an unknown key or a bad value (a manifest edited by hand).
        """
        return cls.from_mapping(data)
