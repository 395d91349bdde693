"""Loading Megatron-Bridge, resolving ``model.recipe``, and building a recipe offline.

The objects a pretrain needs (read from Megatron-Bridge 0.6 ``training/pretrain.py``, ``training/config.py``,
``training/comm_overlap.py``, ``training/flex_dispatcher_backend.py``) are gathered in one :class:`BridgeAPI`, so
the config-building code takes them as an argument and unit tests can hand it stand-ins where Megatron-Bridge
cannot be imported (it needs Transformer Engine).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.payload.errors import BridgeMissing, HFUnreachable, UnknownRecipe
from experiments.payload.mcore_check import load_core

GPT_PROVIDER = "gpt_provider"  # model.recipe value: build a GPTModelProvider from the settings (conf/model/_base)
RECIPES_PACKAGE = "megatron.bridge.recipes"


@dataclass(frozen=True)
class BridgeAPI:
    """The Megatron-Bridge objects the payload uses (``None`` where this Bridge version lacks an optional one)."""

    version: str | None
    ConfigContainer: Any
    GPTModelProvider: Any
    CommOverlapConfig: Any
    TrainingConfig: Any
    ValidationConfig: Any
    DistributedDataParallelConfig: Any
    GPTDatasetConfig: Any
    LoggerConfig: Any
    TokenizerConfig: Any
    CheckpointConfig: Any
    RNGConfig: Any
    DistributedInitConfig: Any
    OptimizerConfig: Any
    SchedulerConfig: Any
    apply_flex_dispatcher_backend: Callable[..., Any]
    runtime_config_update: Callable[..., Any]
    get_mixed_precision_config: Callable[..., Any]
    pretrain: Callable[..., Any]
    forward_step: Callable[..., Any]
    pretrain_module: Any = None
    Callback: Any = None
    set_cuda_graph_modules: Callable[..., Any] | None = None
    AutoBridge: Any = None


def _symbol(path: str, version: str | None, optional: bool = False) -> Any:
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        if optional:
            return None
        raise BridgeMissing(f"Megatron-Bridge {version} has no {path} ({type(e).__name__}: {e}); this payload "
                            "was written against Megatron-Bridge 0.6 (NeMo 26.x containers)") from e


def load_bridge(image_hint: str | None = None) -> BridgeAPI:
    """Import Megatron-Bridge (after Megatron-Core) and gather its objects.

    Raises:
        CoreMissing: megatron.core is not importable.
        BridgeMissing: megatron.bridge (or Transformer Engine, which it imports) is not importable, or lacks
            an object the payload needs; the message says which and suggests the container image.
    """
    load_core()
    hint = f"the image {image_hint}" if image_hint else "the image of the variant's container profile"
    try:
        import megatron.bridge as mb
    except ImportError as e:
        missing = getattr(e, "name", None) or "?"
        raise BridgeMissing(f"megatron.bridge is not importable (missing module {missing!r}: {e}); run inside "
                            f"the training container ({hint}), e.g. nvcr.io/nvidia/nemo:26.06") from e
    version = _bridge_version(mb)
    cfg = "megatron.bridge.training.config."
    return BridgeAPI(
        version=version,
        ConfigContainer=_symbol(cfg + "ConfigContainer", version),
        GPTModelProvider=_symbol("megatron.bridge.models.gpt_provider.GPTModelProvider", version),
        CommOverlapConfig=_symbol("megatron.bridge.training.comm_overlap.CommOverlapConfig", version),
        TrainingConfig=_symbol(cfg + "TrainingConfig", version),
        ValidationConfig=_symbol(cfg + "ValidationConfig", version),
        DistributedDataParallelConfig=_symbol(cfg + "DistributedDataParallelConfig", version),
        GPTDatasetConfig=_symbol(cfg + "GPTDatasetConfig", version),
        LoggerConfig=_symbol(cfg + "LoggerConfig", version),
        TokenizerConfig=_symbol(cfg + "TokenizerConfig", version),
        CheckpointConfig=_symbol(cfg + "CheckpointConfig", version),
        RNGConfig=_symbol(cfg + "RNGConfig", version),
        DistributedInitConfig=_symbol(cfg + "DistributedInitConfig", version),
        OptimizerConfig=_symbol(cfg + "OptimizerConfig", version),
        SchedulerConfig=_symbol(cfg + "SchedulerConfig", version),
        apply_flex_dispatcher_backend=_symbol(
            "megatron.bridge.training.flex_dispatcher_backend.apply_flex_dispatcher_backend", version),
        runtime_config_update=_symbol(cfg + "runtime_config_update", version),
        get_mixed_precision_config=_symbol(
            "megatron.bridge.training.mixed_precision.get_mixed_precision_config", version),
        pretrain=_symbol("megatron.bridge.training.pretrain.pretrain", version),
        forward_step=_symbol("megatron.bridge.training.gpt_step.forward_step", version),
        pretrain_module=importlib.import_module("megatron.bridge.training.pretrain"),
        Callback=_symbol("megatron.bridge.training.callbacks.Callback", version, optional=True),
        set_cuda_graph_modules=_symbol("megatron.bridge.utils.cuda_graph.set_cuda_graph_modules", version,
                                       optional=True),
        AutoBridge=getattr(mb, "AutoBridge", None),
    )


def _bridge_version(mb: Any) -> str | None:
    try:
        import importlib.metadata as md

        return md.version("megatron-bridge")
    except Exception:
        return getattr(mb, "__version__", None)


def stub_compile_helpers() -> bool:
    """Skip Megatron-Bridge's ``compile_helpers()`` when Megatron-Core ships the prebuilt dataset helper.

    The megatron-core wheel ships ``datasets/helpers_cpp*.so`` but no Makefile, and Bridge's
    ``initialize_megatron`` still runs ``make`` there and exits with SystemExit(1) (H200 bring-up gotcha 6).
    Returns True when the stub was installed.
    """
    import megatron.core.datasets as ds

    folder = Path(ds.__file__).parent
    if (folder / "Makefile").exists() or not list(folder.glob("helpers_cpp*.so")):
        return False
    init = importlib.import_module("megatron.bridge.training.initialize")
    init.compile_helpers = lambda: None
    return True


def _close(name: str, candidates: list[str]) -> str:
    matches = difflib.get_close_matches(name, candidates, n=5, cutoff=0.5)
    return f"close matches: {', '.join(matches)}" if matches else "no close matches"


def resolve_recipe(recipe: str) -> Callable[..., Any]:
    """The recipe function ``model.recipe`` names: a dotted path (``pkg.module.function``), or a bare name
    looked up in ``megatron.bridge.recipes``.

    Raises:
        UnknownRecipe: no such module or function; the message lists close matches (difflib).
    """
    module_name, _, func = recipe.rpartition(".")
    module_name = module_name or RECIPES_PACKAGE
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is None or not module_name.startswith(e.name):
            raise  # a dependency inside the recipe module is missing: not a naming problem
        parent, candidates = _deepest_importable(module_name)
        raise UnknownRecipe(f"model.recipe {recipe!r}: no module {e.name!r}"
                            f"{f' under {parent}' if parent else ''}; "
                            f"{_close(module_name.split('.')[-1], candidates)}") from e
    fn = getattr(module, func, None)
    if not callable(fn):
        names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n, None))]
        raise UnknownRecipe(f"model.recipe {recipe!r}: {module_name} has no recipe {func!r}; {_close(func, names)}")
    return fn


def _deepest_importable(module_name: str) -> tuple[str | None, list[str]]:
    parts = module_name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:i])
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        subs = [m.name for m in pkgutil.iter_modules(getattr(mod, "__path__", []))]
        return name, list(dict.fromkeys(subs + [n for n in dir(mod) if not n.startswith("_")]))
    return None, []


# Exceptions (by class name, anywhere in the cause chain) that mean "the Hugging Face Hub was not reachable":
# huggingface_hub.errors and requests/urllib3 connection errors.
_HF_ERRORS = {"LocalEntryNotFoundError", "OfflineModeIsEnabled", "HFValidationError", "RepositoryNotFoundError",
              "GatedRepoError", "ConnectionError", "ConnectTimeout", "ReadTimeout", "MaxRetryError",
              "NewConnectionError", "NameResolutionError"}
_HF_TEXT = ("huggingface.co", "hf.co", "couldn't connect", "offline mode", "can't load the configuration")


def is_hf_unreachable(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception in its cause/context chain) is a Hugging Face Hub access failure."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if type(cur).__name__ in _HF_ERRORS:
            return True
        if isinstance(cur, OSError) and any(t in str(cur).lower() for t in _HF_TEXT):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


@contextlib.contextmanager
def _redirect_hf(auto_bridge: Any, hf_path: str) -> Iterator[list[str]]:
    """While a recipe runs, make ``AutoBridge.from_hf_pretrained(<model id>, revision=...)`` load ``hf_path``.

    Megatron-Bridge >= 0.4 recipes take no arguments and hard-code the Hugging Face model id; this is how a local
    config folder reaches them on an offline cluster. Yields the ids that were redirected.
    """
    own = "from_hf_pretrained" in vars(auto_bridge)
    original = inspect.getattr_static(auto_bridge, "from_hf_pretrained")
    bound = auto_bridge.from_hf_pretrained
    redirected: list[str] = []

    def from_local(cls: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
        redirected.append(str(path))
        kwargs.pop("revision", None)
        return bound(hf_path, *args, **kwargs)

    auto_bridge.from_hf_pretrained = classmethod(from_local)
    try:
        yield redirected
    finally:
        if own:
            auto_bridge.from_hf_pretrained = original
        else:
            del auto_bridge.from_hf_pretrained


def call_recipe(fn: Callable[..., Any], hf_path: str | None, api: BridgeAPI) -> tuple[Any, list[str]]:
    """Build the recipe's ConfigContainer, honouring ``model.hf_path``. Returns ``(cfg, notes)``.

    Recipes that take ``hf_path`` (Megatron-Bridge <= 0.3) get it as an argument; newer ones have their
    ``AutoBridge.from_hf_pretrained`` call redirected and their tokenizer pointed at the same folder.

    Raises:
        HFUnreachable: the Hugging Face config could not be loaded (offline); names ``model.hf_path``.
        UnknownRecipe: the function did not return a ConfigContainer-like object.
    """
    notes: list[str] = []
    params = inspect.signature(fn).parameters
    takes_hf = "hf_path" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    try:
        if hf_path and takes_hf:
            cfg = fn(hf_path=hf_path)
            notes.append(f"recipe called with hf_path={hf_path!r}")
        elif hf_path and api.AutoBridge is not None:
            with _redirect_hf(api.AutoBridge, hf_path) as ids:
                cfg = fn()
            notes.append(f"AutoBridge.from_hf_pretrained({', '.join(ids) or '-'}) redirected to {hf_path!r}")
            tok = getattr(cfg, "tokenizer", None)
            if tok is not None and getattr(tok, "tokenizer_model", None) in ids:
                tok.tokenizer_model = hf_path
                notes.append(f"tokenizer_model set to {hf_path!r}")
        else:
            cfg = fn()
    except Exception as e:
        if is_hf_unreachable(e):
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise HFUnreachable(
                f"recipe {fn.__module__}.{fn.__name__} could not load its Hugging Face config ({first}); "
                "on an offline cluster set model.hf_path=<local folder holding config.json> "
                "(and HF_HUB_OFFLINE=1)") from e
        raise
    if not all(hasattr(cfg, a) for a in ("model", "train", "dataset")):
        raise UnknownRecipe(f"{fn.__module__}.{fn.__name__} returned {type(cfg).__name__}, not a ConfigContainer")
    return cfg, notes
