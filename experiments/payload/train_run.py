"""Train mode: build the config, prove it is what the variant says, then ``pretrain(cfg, forward_step)``.

Order (each step can stop the run before any training iteration):
1. a GPU must be present (CONTRACTS §1: a training job never falls back to validate mode by itself);
2. build the recipe / GPTModelProvider and apply the variant (:mod:`experiments.payload.bridge_config`);
3. pre-check: run Megatron-Bridge's own ``runtime_config_update`` (the finalisation ``pretrain`` starts with:
   mixed precision, ``CommOverlapConfig.setup``, ``ConfigContainer.validate`` -> Megatron-Core
   ``TransformerConfig.__post_init__``) on a deep copy, compare requested with effective values, check the
   environment, and write a first ``effective_config.json`` (``written_at: before_setup``);
4. ``pretrain`` with a hook at ``on_train_start`` (Bridge callbacks; on a Bridge without callbacks, a wrapper
   around the ``train`` function ``pretrain`` calls). It fires on every rank after setup and before iteration 1:
   it gathers the host names of all ranks, re-reads the finalised config and the token dispatcher classes
   actually built, compares again, and rank 0 rewrites ``effective_config.json`` (``written_at: train_start``).
   Any difference outside ``allow_adjust`` logs a loud MISMATCH line and stops the run with exit code 16.
5. an AssertionError/ValueError raised by the library during setup (before that hook; e.g. Megatron-Core's
   "DeepEP dispatcher requires TPxEP > 1 when instantiating TransformerLayer", seen on the H200) is a check
   failure (exit 1, the message written into the document); any other exception from pretrain is exit 20.
"""

from __future__ import annotations

import copy
import inspect
import json
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from experiments.payload import phases, profile, runtime_info
from experiments.payload.auto_iters import AutoIters, StopRule
from experiments.payload.bridge_api import BridgeAPI, is_hf_unreachable, load_bridge, stub_compile_helpers
from experiments.payload.bridge_config import Applied, apply_variant, build_config, model_config_of
from experiments.payload.effective import read_effective
from experiments.payload.errors import (
    CheckFailed,
    EnvMismatch,
    HFUnreachable,
    Mismatch,
    NoGPU,
    PayloadError,
    TrainingFailed,
)
from experiments.payload.mcore_check import library_message
from experiments.payload.outcome import EFFECTIVE_FILE, Outcome, Verdict, assemble, loud, write_effective
from experiments.payload.runtime_info import say
from experiments.payload.spec import VariantSpec

# Megatron-Core transformer/moe/moe_layer.py: the dispatcher class each moe_token_dispatcher_type builds.
DISPATCHER_CLASS = {"alltoall": "MoEAlltoAllTokenDispatcher", "allgather": "MoEAllGatherTokenDispatcher",
                    "flex": "MoEFlexTokenDispatcher"}


def raise_for(spec: VariantSpec, v: Verdict) -> None:
    """Log a failed verdict loudly and raise the matching error (checks, then mismatches, then environment).

    Raises:
        CheckFailed, Mismatch, EnvMismatch.
    """
    if v.verdict == "pass":
        return
    for line in loud(spec, v):
        say(line)
    msgs = v.doc["checks"]["messages"]
    if v.mismatches:
        raise Mismatch("; ".join(f"{m['field']} requested {m['requested']!r}, effective {m['effective']!r}"
                                 for m in v.mismatches))
    if v.env_problems and len(v.env_problems) == len(msgs):
        raise EnvMismatch("; ".join(v.env_problems))
    raise CheckFailed(msgs[0], msgs)


def precheck(spec: VariantSpec, cfg: Any, api: BridgeAPI, applied: Applied, out_dir: Path, rank: int) -> None:
    """Step 3: Bridge's finalisation on a deep copy; writes the first effective_config.json (rank 0).

    Raises:
        CheckFailed: a library check rejected the config (its message is logged and written).
        Mismatch, EnvMismatch: see :func:`raise_for`.
    """
    try:
        probe = copy.deepcopy(cfg)
    except Exception as e:  # a recipe holding something uncopyable: pretrain's own finalisation still checks
        say(f"[payload] pre-check skipped (deepcopy failed: {type(e).__name__}: {e})")
        return
    failures = []
    try:
        api.runtime_config_update(probe)
    except Exception as e:
        failures.append(library_message(e))
        # the library's own exception, as a traceback would show it (e.g. Bridge's AssertionError at EP=1)
        print("".join(traceback.format_exception(e)).rstrip(), file=sys.stderr, flush=True)
    outcome = Outcome(effective=read_effective(model_config_of(probe), probe.train), adjustments=applied.adjustments,
                      failures=failures, library_messages=applied.library_messages, notes=list(applied.notes),
                      not_run=["model build and process-group checks run inside pretrain (see train_start)"])
    v = assemble(spec, outcome, hostnames=None, target=False, written_at="before_setup")
    if rank == 0:
        write_effective(out_dir, v.doc)
    raise_for(spec, v)
    say(f"[payload] pre-check {spec.name}: effective config matches the variant "
        f"({len(v.doc['adjustments'])} allowed adjustment(s))")


def gather_hostnames() -> list[str]:
    """Host names of all ranks in rank order (``all_gather_object``), or this host's alone without a group."""
    host = socket.gethostname()
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            out: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(out, host)
            return [str(h) for h in out]
    except Exception as e:
        say(f"[payload] could not gather host names: {type(e).__name__}: {e}")
    return [host]


def dispatcher_runtime(model_chunks: Any) -> dict[str, list[str]]:
    """Class names of the token dispatchers (and flex communication managers) the built model really holds."""
    dispatchers, managers = set(), set()
    for chunk in model_chunks or []:
        for module in getattr(chunk, "modules", lambda: [])():
            td = getattr(module, "token_dispatcher", None)
            if td is not None:
                dispatchers.add(type(td).__name__)
                mgr = getattr(td, "_comm_manager", None)
                if mgr is not None:
                    managers.add(type(mgr).__name__)
    return {"token_dispatchers": sorted(dispatchers), "flex_comm_managers": sorted(managers)}


class TrainStartHook:
    """Step 4, called on every rank with the finalised ConfigContainer and the model chunks."""

    def __init__(self, spec: VariantSpec, applied: Applied, out_dir: Path, rank: int):
        self.spec, self.applied, self.out_dir, self.rank = spec, applied, out_dir, rank
        self.fired = False

    def __call__(self, cfg: Any, model_chunks: Any) -> None:
        phases.stamp("initialized")
        self.fired = True
        hostnames = gather_hostnames()
        effective = read_effective(model_config_of(cfg), cfg.train)
        runtime = dispatcher_runtime(model_chunks)
        extra = []
        want = DISPATCHER_CLASS.get(str(effective.get("moe_token_dispatcher_type")))
        requested = DISPATCHER_CLASS.get(self.spec.settings["moe_token_dispatcher_type"])
        if runtime["token_dispatchers"] and runtime["token_dispatchers"] != [requested]:
            extra.append({"field": "token_dispatcher", "requested": requested,
                          "effective": runtime["token_dispatchers"],
                          "why": f"the built MoE layers hold these dispatcher classes (config says {want})"})
        outcome = Outcome(effective=effective, adjustments=self.applied.adjustments, notes=list(self.applied.notes),
                          library_messages=self.applied.library_messages, extra_mismatches=extra, runtime=runtime)
        v = assemble(self.spec, outcome, hostnames=hostnames, target=False, written_at="train_start")
        if self.rank == 0:
            write_effective(self.out_dir, v.doc)
        raise_for(self.spec, v)
        say(f"[payload] train_start {self.spec.name}: effective config matches the variant on "
            f"{len(hostnames)} rank(s); dispatchers {runtime['token_dispatchers']}")


def run_pretrain(api: BridgeAPI, cfg: Any, hook: TrainStartHook, auto: AutoIters | None = None) -> None:
    """``pretrain(cfg, forward_step)`` with ``hook`` at train start (callbacks, else a wrapper around ``train``) and,
    for ``payload.train_iters=auto``, ``auto`` at every step's start and end (callbacks only).

    Raises:
        TrainingFailed: ``auto`` on a Megatron-Bridge without callbacks (no per-step hook to stop the run).
    """
    if api.Callback is not None and "callbacks" in inspect.signature(api.pretrain).parameters:
        class OnTrainStart(api.Callback):
            def on_train_start(self, context: Any) -> None:
                hook(context.state.cfg, context.model)

            if auto is not None:
                def on_train_step_start(self, context: Any) -> None:
                    auto.step_start()

                def on_train_step_end(self, context: Any) -> None:
                    auto.step_end(context.state.cfg, context.state.train_state.step)

        api.pretrain(cfg, api.forward_step, callbacks=[OnTrainStart()])
        return
    if auto is not None:
        raise TrainingFailed(f"payload.train_iters=auto needs Megatron-Bridge callbacks (on_train_step_end); "
                             f"Megatron-Bridge {api.version} has none: set payload.train_iters to a number")
    module, original = api.pretrain_module, api.pretrain_module.train

    def train(*args: Any, **kwargs: Any) -> Any:
        hook(cfg, args[1] if len(args) > 1 else kwargs.get("model"))
        return original(*args, **kwargs)

    module.train = train
    try:
        api.pretrain(cfg, api.forward_step)
    finally:
        module.train = original


def setup_check_failed(exc: BaseException, out_dir: Path, rank: int) -> None:
    """A library assertion during setup (model build, before iteration 1), e.g. Megatron-Core's "DeepEP dispatcher
    requires TPxEP > 1": rewrite the document with the library's message and raise CheckFailed (exit 1).

    Raises:
        CheckFailed: always.
    """
    msg = library_message(exc)
    prior = Path(out_dir) / EFFECTIVE_FILE
    if rank == 0 and prior.exists():  # the pre-check's document: same config, now with the library's verdict
        doc = json.loads(prior.read_text())
        doc["checks"].update(verdict="fail", messages=[msg], not_run=[])
        doc["written_at"] = "setup_failed"
        write_effective(out_dir, doc)
    say(f"[payload]   {msg}")
    raise CheckFailed(msg) from exc


def run_train(spec: VariantSpec, out_dir: Path, api: BridgeAPI | None = None) -> None:
    """Train mode for one variant (see the module docstring). Returns when training finished.

    Raises:
        NoGPU, BridgeMissing, CoreMissing, UnknownRecipe, HFUnreachable, UnknownField, CheckFailed, Mismatch,
        EnvMismatch: diagnosed before training; TrainingFailed: pretrain raised afterwards.
    """
    rank = runtime_info.rank()
    name, cap, count = runtime_info.gpu()
    if not count:
        raise NoGPU(f"train mode found no GPU on {socket.gethostname()} (torch.cuda.is_available() is False); "
                    "use mode=validate to check configs without a GPU")
    api = api or load_bridge(spec.container.get("image"))
    phases.stamp("imported")
    if stub_compile_helpers():
        say("[payload] megatron-core ships the prebuilt dataset helper without a Makefile: compile_helpers skipped")
    cfg, notes = build_config(spec, api)
    applied = apply_variant(cfg, spec, api)
    applied.notes[:0] = notes
    if profile.configure(cfg, spec, out_dir) is not None:
        applied.notes.append(f"profile: torch.profiler trace of steady steps in {profile.TRACE_DIR}")
    for note in applied.notes:
        say(f"[payload] {note}")
    say(f"[payload] train {spec.name} on {name} (cc {cap}), rank {rank}; Megatron-Bridge {api.version}")
    precheck(spec, cfg, api, applied, out_dir, rank)
    phases.stamp("checked")
    hook = TrainStartHook(spec, applied, out_dir, rank)
    auto = AutoIters(StopRule(spec.stop_precision, spec.train_iters), say) if spec.auto_iters else None
    try:
        run_pretrain(api, cfg, hook, auto)
    except PayloadError:
        raise
    except Exception as e:
        traceback.print_exc()
        if not hook.fired and isinstance(e, AssertionError | ValueError):
            setup_check_failed(e, out_dir, rank)
        if is_hf_unreachable(e):  # e.g. the recipe's HuggingFaceTokenizer, loaded during setup
            raise HFUnreachable(f"setup could not reach the Hugging Face Hub ({str(e).strip().splitlines()[0]}); "
                                "set model.hf_path=<local folder> (config and tokenizer)") from e
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise TrainingFailed(f"pretrain raised {type(e).__name__}: {first}") from e
    phases.stamp("trained")
    done = auto.stopped_at if auto is not None and auto.stopped_at else spec.train_iters
    say(f"[payload] train {spec.name}: pretrain returned after {done} iterations")
