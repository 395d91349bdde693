"""What a failure family's lines mean beyond their wording: Xid codes, bare device-side assertions and the
dispatcher a run really used.

- Xid (NVIDIA, docs.nvidia.com/deploy/xid-errors, "Xid Error Listing"): 13 (Graphics Engine Exception), 31 (GPU
  memory page fault), 43 (GPU stopped processing) are listed with "User App Error" as a cause and follow an
  application's illegal access or trap; 45 (Preemptive cleanup, due to previous errors) is the driver's cleanup
  after another error or a killed process. These are ``cuda_error`` (the application's fault as the driver saw
  it); every other Xid (48 DBE, 63/64 row remapping, 74 NVLink, 79 fallen off the bus, 92/94/95 ECC, 119/120 GSP,
  ...) stays ``hardware_failure``.
- A device-side assertion prints ``file.cu:123: void kernel(...): block: [0,0,0], thread: [0,0,0] Assertion
  `cond` failed.`` (CUDA's ``__assertfail``; PyTorch's ``CUDA_KERNEL_ASSERT`` uses it) or DeepEP's
  ``EP_DEVICE_ASSERT`` form ``Assertion failed: file.cu:123, condition: cond`` (csrc/kernels/exception.cuh), with
  no Python frame of the kernel. When no line or frame names DeepEP/HybridEP, the kernel is attributed through the
  dispatcher the run really used: with the flex dispatcher (``moe_token_dispatcher_type`` flex, from
  effective_config.json, the log's config dump or the requested label) a device assertion outside PyTorch's,
  Transformer Engine's and the other libraries' own kernels (``_OTHER_KERNELS``) is ``flex_kernel_assertion``;
  with alltoall or allgather it stays ``assertion``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analysis.judge.expectation import Expectation
    from analysis.logs import ParsedLog

APPLICATION_XIDS = frozenset({13, 31, 43, 45})
_DEVICE_ASSERT = re.compile(r"block: \[[\d, ]+\], thread: \[[\d, ]+\]|Assertion failed: \S+\.cuh?:\d+, condition:"
                            r"|\.cuh?:\d+: .*Assertion [`']")
# kernels of other libraries, whose own device asserts are theirs whatever the dispatcher
_OTHER_KERNELS = re.compile(r"aten/|ATen/|/c10/|/torch/|transformer_engine|/apex/|flash_attn|flash-attention|triton"
                            r"|/nccl/|cutlass/include|/thrust/|/cub/", re.I)
FLEX_BACKENDS = ("deepep", "hybridep")


def xid_reason(xid: int | None) -> str:
    """``cuda_error`` for the application-caused Xids, ``hardware_failure`` for the rest (module docstring)."""
    return "cuda_error" if xid in APPLICATION_XIDS else "hardware_failure"


def is_device_assert(text: str) -> bool:
    """True for a device-side assertion line (CUDA ``__assertfail`` or DeepEP ``EP_DEVICE_ASSERT`` form)."""
    return _DEVICE_ASSERT.search(text) is not None


def foreign_kernel(location: str | None, text: str) -> bool:
    """True when the asserting kernel is PyTorch's, Transformer Engine's or another library's (``_OTHER_KERNELS``)."""
    return _OTHER_KERNELS.search(location or text) is not None


def effective_dispatcher(expect: Expectation | None, effective: dict[str, Any] | None,
                         log: ParsedLog | None) -> tuple[str | None, str | None]:
    """(``moe_token_dispatcher_type``, ``moe_flex_dispatcher_backend``) of what really ran: effective_config.json's
    ``effective`` record first, then the log's config dump, then the requested label (a flex backend name means
    flex); (None, None) when nothing says."""
    eff = (effective or {}).get("effective") if isinstance((effective or {}).get("effective"), dict) else None
    for source in (eff or {}, (log.config if log is not None else {})):
        kind = _word(source.get("moe_token_dispatcher_type"))
        if kind:
            return kind, _word(source.get("moe_flex_dispatcher_backend"))
    requested = dict((effective or {}).get("requested") or {}) if isinstance((effective or {}).get("requested"),
                                                                             dict) else {}
    requested.update((expect.requested if expect is not None else None) or {})
    settings = (expect.settings if expect is not None else None) or {}
    kind = _word(settings.get("moe_token_dispatcher_type"))
    if kind:
        return kind, _word(settings.get("moe_flex_dispatcher_backend"))
    wanted = _word(requested.get("dispatcher"))
    if wanted in FLEX_BACKENDS:
        return "flex", wanted
    return wanted, None


def _word(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip().strip("'\"").lower()
    return text if text and text not in ("none", "null") else None
