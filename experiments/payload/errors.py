"""Exit codes of the payload and the exceptions that carry them.

Every failure the payload can diagnose itself has its own exit code and a one-line cause, printed as
``[payload] error <code> <kind>: <cause>`` (the launcher and the analysis read both). The table is repeated in
the docstring of :mod:`experiments.train`, which is the command users run.
"""

from __future__ import annotations

# Exit codes (payload process; CONTRACTS §5 holds the sweep's own codes, which are a different table).
OK = 0
CHECK_FAILED = 1  # a Megatron-Bridge / Megatron-Core check rejected the config (validate verdict "fail")
USAGE = 2  # bad command line (argparse)
BAD_VARIANT_FILE = 10  # variant.json missing, unreadable, not JSON, wrong schema_version, or malformed
UNKNOWN_RECIPE = 11  # model.recipe does not name a recipe function
BRIDGE_MISSING = 12  # megatron.bridge cannot be imported (train mode, or a recipe build)
CORE_MISSING = 13  # megatron.core cannot be imported
UNKNOWN_FIELD = 14  # a variant setting does not exist on this Megatron-Bridge / Megatron-Core version
HF_UNREACHABLE = 15  # the recipe's Hugging Face config cannot be loaded (offline cluster)
MISMATCH = 16  # requested != effective outside allow_adjust (fallback, override, recipe default)
ENV_MISMATCH = 17  # an environment variable the variant exports is missing or has another value
NO_GPU = 18  # train mode found no GPU (CONTRACTS §1: never falls back to validate by itself)
INTERNAL = 19  # a bug in the payload itself (traceback printed)
TRAINING_FAILED = 20  # pretrain() raised after the config was accepted (OOM, NCCL, DeepEP missing, ...)
INTERRUPTED = 130  # SIGINT

EXIT_CODES: dict[int, str] = {
    OK: "ok: training finished, or validate verdict pass",
    CHECK_FAILED: "check_failed: a Megatron-Bridge/Megatron-Core check rejected the config (library message logged)",
    USAGE: "usage: bad command line",
    BAD_VARIANT_FILE: "bad_variant_file: variant.json missing, unreadable, not JSON, or wrong schema_version",
    UNKNOWN_RECIPE: "unknown_recipe: model.recipe names no recipe function (close matches listed)",
    BRIDGE_MISSING: "bridge_missing: megatron.bridge not importable (use the training container image)",
    CORE_MISSING: "core_missing: megatron.core not importable (use the training container image)",
    UNKNOWN_FIELD: "unknown_field: a setting does not exist on this Megatron-Bridge/Core version",
    HF_UNREACHABLE: "hf_unreachable: Hugging Face config not reachable offline (set model.hf_path)",
    MISMATCH: "mismatch: requested != effective outside allow_adjust (fallback, override, recipe default)",
    ENV_MISMATCH: "env_mismatch: an exported environment variable is missing or differs",
    NO_GPU: "no_gpu: train mode needs a GPU",
    INTERNAL: "internal: payload bug (traceback in the log)",
    TRAINING_FAILED: "training_failed: pretrain raised after the config was accepted (traceback in the log)",
    INTERRUPTED: "interrupted: SIGINT",
}


class PayloadError(Exception):
    """A failure the payload diagnosed: ``code`` is the exit code, ``str(self)`` the one-line cause."""

    code = INTERNAL
    kind = "internal"

    def line(self) -> str:
        """The log line for this error: ``[payload] error <code> <kind>: <cause>``."""
        return f"[payload] error {self.code} {self.kind}: {self}"


class BadVariantFile(PayloadError):
    code, kind = BAD_VARIANT_FILE, "bad_variant_file"


class UnknownRecipe(PayloadError):
    code, kind = UNKNOWN_RECIPE, "unknown_recipe"


class BridgeMissing(PayloadError):
    code, kind = BRIDGE_MISSING, "bridge_missing"


class CoreMissing(PayloadError):
    code, kind = CORE_MISSING, "core_missing"


class UnknownField(PayloadError):
    code, kind = UNKNOWN_FIELD, "unknown_field"


class HFUnreachable(PayloadError):
    code, kind = HF_UNREACHABLE, "hf_unreachable"


class Mismatch(PayloadError):
    code, kind = MISMATCH, "mismatch"


class EnvMismatch(PayloadError):
    code, kind = ENV_MISMATCH, "env_mismatch"


class NoGPU(PayloadError):
    code, kind = NO_GPU, "no_gpu"


class TrainingFailed(PayloadError):
    """pretrain() raised after the payload accepted the config (the traceback is already in the log)."""

    code, kind = TRAINING_FAILED, "training_failed"


class CheckFailed(PayloadError):
    """A library check rejected the config; ``messages`` are the library's own texts."""

    code, kind = CHECK_FAILED, "check_failed"

    def __init__(self, message: str, messages: list[str] | None = None):
        super().__init__(message)
        self.messages = list(messages or [message])
