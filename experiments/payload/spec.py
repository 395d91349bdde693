"""Reading ``variant.json`` (schema_version 1, written by the planner; CONTRACTS §11) into a typed record.

Only the JSON boundary uses dicts: :func:`load_variant` returns a frozen :class:`VariantSpec`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from contracts.records import DEFAULT_ALLOW_ADJUST, DISPATCHERS, FLEX_BACKENDS, SCHEMA_VERSION
from experiments.payload.errors import BadVariantFile

MODES = ("train", "validate")
# The four knob fields every variant sets explicitly (FACTS §1, CASES C03: "not set" never means "off").
KNOB_FIELDS = (
    "moe_token_dispatcher_type",
    "moe_flex_dispatcher_backend",
    "overlap_moe_expert_parallel_comm",
    "delay_wgrad_compute",
)
DEFAULT_TRAIN_ITERS = 30  # CONTRACTS §7: leaves >= 20 steady iterations after the default warm-up


# Settings whose ``None`` means "keep the recipe's / provider's own value" (experiments/config.py ModelConfig):
# they are set only when the model profile gives a value.
# HybridEP tuning variables, read by DeepEP's HybridEPBuffer only on the hybridep backend. NVIDIA's recipes export them
# on HybridEP arms only (Megatron-Bridge 0.6.2 perf_recipes/environment.py:28-39, HYBRID_EP_ENV_NAMES), so the planner
# records them on those arms only and the payload unsets them on the others (:func:`drop_foreign_env`).
HYBRID_EP_ENV_NAMES = ("NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN", "NUM_OF_TOKENS_PER_CHUNK_COMBINE_API",
                       "NVLINK_DOMAIN_SIZE", "USE_MNNVL")


def arm_env(env: dict[str, Any], dispatcher: str) -> dict[str, Any]:
    """The environment of one arm: the HybridEP variables only on a hybridep arm."""
    return dict(env) if dispatcher == "hybridep" else {k: v for k, v in env.items() if k not in HYBRID_EP_ENV_NAMES}


def drop_foreign_env(dispatcher: str, environ: Any = None) -> list[str]:
    """Unset the HybridEP variables in this process on an arm that is not hybridep; returns the names unset."""
    import os

    env = os.environ if environ is None else environ
    if dispatcher == "hybridep":
        return []
    gone = [n for n in HYBRID_EP_ENV_NAMES if n in env]
    for n in gone:
        del env[n]
    return gone


LIBRARY_DEFAULT_WHEN_NONE = ("moe_permute_fusion", "moe_router_fusion", "bias_activation_fusion",
                             "apply_rope_fusion", "cross_entropy_loss_fusion", "cross_entropy_fusion_impl")

@dataclass(frozen=True, kw_only=True)
class VariantSpec:
    """One resolved variant as the payload sees it.

    ``settings`` hold the Megatron-named fields (CONTRACTS §9); ``env`` is what the launcher says it exports
    (secret values are ``"***"``); ``train_iters`` / ``seed`` / ``hold_s`` (seconds) / ``log_interval`` come
    from the ``payload`` block, after command-line overrides.
    """

    path: str
    name: str
    mode: str
    dispatcher: str
    overlap: bool
    delay_wgrad: bool
    axes: dict[str, Any] = field(default_factory=dict)
    model_name: str = ""
    recipe: str = ""
    hf_path: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    cluster: dict[str, Any] = field(default_factory=dict)
    container: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    train_iters: int = DEFAULT_TRAIN_ITERS  # with auto_iters: the cap (payload.max_iters)
    auto_iters: bool = False  # payload.train_iters=auto: stop once the steady step time is known (auto_iters.py)
    stop_precision: float = 0.005  # payload.stop_precision: the relative half-width that stops an auto run
    seed: int = 1234
    hold_s: float = 0.0
    hold_at: str = "end"  # "end": hold after the work; "start": hold first (a job stopped mid-run)
    log_interval: int = 1
    allow_adjust: tuple[str, ...] = DEFAULT_ALLOW_ADJUST
    attempt: int | None = None
    sweep_id: str | None = None
    profile: bool = False  # payload.profile: capture a torch.profiler trace of a few steady steps (attempt 1)
    # precision (conf/precision/): its name and the Megatron-Bridge mixed-precision recipe train mode selects
    precision: dict[str, Any] = field(default_factory=lambda: {"name": "bf16", "mixed_precision": "bf16_mixed"})

    @property
    def world_size(self) -> int | None:
        """Target world size (ranks) from ``cluster.world_size``, else nodes x gpus_per_node, else None."""
        ws = self.cluster.get("world_size")
        if isinstance(ws, int) and ws > 0:
            return ws
        nodes, gpn = self.cluster.get("nodes"), self.cluster.get("gpus_per_node")
        if isinstance(nodes, int) and isinstance(gpn, int):
            return nodes * gpn
        return None

    def with_overrides(self, mode: str | None = None, attempt: int | None = None,
                       hold_s: float | None = None) -> VariantSpec:
        """Copy with command-line overrides applied (CLI flags override the file)."""
        kw: dict[str, Any] = {}
        if mode is not None:
            kw["mode"] = _check_mode(mode, "--mode")
        if attempt is not None:
            kw["attempt"] = attempt
        if hold_s is not None:
            kw["hold_s"] = float(hold_s)
        return replace(self, **kw)


def _check_mode(mode: Any, where: str) -> str:
    if mode not in MODES:
        raise BadVariantFile(f"{where} is {mode!r}; valid: {', '.join(MODES)}")
    return mode


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise BadVariantFile(f"variant file {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadVariantFile(f"variant file {path} is unreadable: {type(e).__name__}: {e}") from e
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadVariantFile(f"variant file {path} is not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise BadVariantFile(f"variant file {path} holds a {type(doc).__name__}, not a JSON object")
    return doc


def _expect(cond: bool, path: Path, what: str) -> None:
    if not cond:
        raise BadVariantFile(f"variant file {path}: {what}")


def load_variant(path: str | Path) -> VariantSpec:
    """Read and check ``variant.json``.

    Raises:
        BadVariantFile: the file is missing, unreadable, not a JSON object, has a schema_version other than 1,
            lacks a required key, or its label (dispatcher/overlap/delay_wgrad) disagrees with its settings.
    """
    p = Path(path)
    doc = _read_json(p)
    sv = doc.get("schema_version")
    _expect(sv == SCHEMA_VERSION, p, f"schema_version is {sv!r}; this payload reads schema_version {SCHEMA_VERSION}")
    for key in ("variant", "dispatcher", "overlap", "delay_wgrad", "model", "settings"):
        _expect(key in doc, p, f"missing key {key!r}")
    _expect(isinstance(doc["variant"], str) and doc["variant"] != "", p, "'variant' must be a non-empty string")
    _expect(doc["dispatcher"] in DISPATCHERS, p,
            f"dispatcher {doc['dispatcher']!r} is not one of {', '.join(DISPATCHERS)}")
    for key in ("overlap", "delay_wgrad"):
        _expect(isinstance(doc[key], bool), p, f"{key!r} must be true or false, got {doc[key]!r}")
    model, settings = doc["model"], doc["settings"]
    _expect(isinstance(model, dict) and isinstance(model.get("recipe"), str) and model["recipe"] != "", p,
            "model.recipe must be a non-empty string")
    _expect(isinstance(settings, dict), p, "'settings' must be an object")
    missing = [k for k in KNOB_FIELDS if k not in settings]
    _expect(not missing, p, f"settings lack {', '.join(missing)} (every knob must be explicit, CASES C03)")
    _check_label(doc, settings, p)
    payload = doc.get("payload") or {}
    _expect(isinstance(payload, dict), p, "'payload' must be an object")
    train_iters = payload.get("train_iters") or DEFAULT_TRAIN_ITERS
    auto = train_iters == "auto"
    if auto:
        train_iters = payload.get("max_iters") or DEFAULT_TRAIN_ITERS
    _expect(isinstance(train_iters, int) and train_iters > 0, p, f"payload.train_iters {train_iters!r} is not > 0")
    stop = payload.get("stop_precision") or 0.005
    _expect(isinstance(stop, int | float) and 0 < stop < 1, p, f"payload.stop_precision {stop!r} is not in (0, 1)")
    allow = doc.get("allow_adjust")
    return VariantSpec(
        path=str(p),
        name=doc["variant"],
        mode=_check_mode(doc.get("mode") or "train", "mode"),
        dispatcher=doc["dispatcher"],
        overlap=doc["overlap"],
        delay_wgrad=doc["delay_wgrad"],
        axes=dict(doc.get("axes") or {}),
        model_name=str(model.get("name") or ""),
        recipe=model["recipe"],
        hf_path=model.get("hf_path"),
        settings=dict(settings),
        cluster=dict(doc.get("cluster") or {}),
        container=dict(doc.get("container") or {}),
        env={str(k): v for k, v in (doc.get("env") or {}).items()},
        train_iters=train_iters,
        auto_iters=auto,
        stop_precision=float(stop),
        seed=int(payload.get("seed", 1234)),
        hold_s=float(payload.get("hold_s") or 0),
        hold_at="start" if payload.get("hold_at") == "start" else "end",
        log_interval=int(payload.get("log_interval") or 1),
        allow_adjust=tuple(allow) if allow is not None else DEFAULT_ALLOW_ADJUST,
        sweep_id=doc.get("sweep_id"),
        profile=payload.get("profile") is True,
        precision=dict(doc.get("precision") or {"name": "bf16", "mixed_precision": "bf16_mixed"}),
    )


def _check_label(doc: dict[str, Any], settings: dict[str, Any], p: Path) -> None:
    """The label must say what the settings say: a planner bug here would make the A/B comparison meaningless."""
    disp = doc["dispatcher"]
    want_type = "flex" if disp in FLEX_BACKENDS else disp
    want_backend = disp if disp in FLEX_BACKENDS else None
    got = (settings["moe_token_dispatcher_type"], settings["moe_flex_dispatcher_backend"])
    _expect(got == (want_type, want_backend), p,
            f"dispatcher {disp!r} but settings say moe_token_dispatcher_type={got[0]!r}, "
            f"moe_flex_dispatcher_backend={got[1]!r}")
    for label, key in (("overlap", "overlap_moe_expert_parallel_comm"), ("delay_wgrad", "delay_wgrad_compute")):
        _expect(settings[key] is doc[label], p, f"{label}={doc[label]} but settings say {key}={settings[key]!r}")
