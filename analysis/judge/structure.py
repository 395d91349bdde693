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
- A bare device assertion (``Assertion `cond' failed.`` without file or block) is attributed by the identifiers in
  its condition first (:func:`kernel_of_condition`): DeepEP's variables make it the flex kernel's whatever the
  dispatcher, PyTorch's keep it an ``assertion`` in a flex run; only a condition that names neither falls back to
  the dispatcher.
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
# a bare device assert (``Assertion `cond' failed.``, no file, no block) names its kernel only through the
# identifiers of its condition: DeepEP's/HybridEP's buffer, rank and channel variables (deepseek-ai/DeepEP
# csrc/kernels/{intranode,internode,internode_ll}.cu, csrc/config.hpp, hybrid-ep csrc/hybrid_ep/config.cuh), and
# PyTorch's kernel variables (aten/src/ATen/native/cuda: Indexing.cu ``srcIndex < srcSelectDimSize``,
# ``dstIndex < dstAddDimSize``, Loss.cu / NLLLoss2d ``t >= 0 && t < n_classes``, ``cur_target``, ``input_val``,
# ScatterGatherKernel ``idx_dim >= 0 && idx_dim < index_size``, IndexKernel ``index out of bounds``)
FLEX_IDENTIFIERS = frozenset({
    "num_rc_per_pe", "num_channels", "num_max_nvl_chunked_recv_tokens", "num_max_nvl_chunked_send_tokens",
    "num_max_rdma_chunked_recv_tokens", "num_max_rdma_chunked_send_tokens", "num_rdma_ranks", "num_nvl_ranks",
    "nvl_rank", "rdma_rank", "kNumRanks", "kNumRDMARanks", "NUM_MAX_NVL_PEERS", "num_max_dispatch_tokens_per_rank",
    "rdma_channel_prefix_matrix", "gbl_channel_prefix_matrix", "recv_rdma_rank_prefix_sum", "num_rdma_bytes",
    "num_nvl_bytes", "max_num_of_tokens_per_rank", "num_of_experts_per_rank", "num_of_ranks_per_node",
    "num_of_nodes", "NUM_MAX_RDMA_PEERS", "kNumMaxTopK", "num_worst_tokens", "expert_alignment"})
TORCH_IDENTIFIERS = frozenset({
    "srcIndex", "srcSelectDimSize", "dstIndex", "dstAddDimSize", "dstCopyDimSize", "n_classes", "cur_target",
    "input_val", "idx_dim", "index_size", "self_dim_size", "src_dim_size", "numel", "t", "target", "out of bounds",
    "ind", "padding_idx", "weight_size", "num_embeddings", "input_size", "output_size"})
_IDENT = re.compile(r"[A-Za-z_]\w*")


def xid_reason(xid: int | None) -> str:
    """``cuda_error`` for the application-caused Xids, ``hardware_failure`` for the rest (module docstring)."""
    return "cuda_error" if xid in APPLICATION_XIDS else "hardware_failure"


def is_device_assert(text: str) -> bool:
    """True for a device-side assertion line (CUDA ``__assertfail`` or DeepEP ``EP_DEVICE_ASSERT`` form)."""
    return _DEVICE_ASSERT.search(text) is not None


def kernel_of_condition(condition: str | None) -> str | None:
    """``flex`` when an assertion's condition names DeepEP's/HybridEP's own variables (``FLEX_IDENTIFIERS``),
    ``foreign`` when it names PyTorch's kernel variables (``TORCH_IDENTIFIERS``, or the ``index out of bounds``
    message), None when its identifiers say nothing."""
    if not condition:
        return None
    names = set(_IDENT.findall(condition))
    if names & FLEX_IDENTIFIERS:
        return "flex"
    if names & TORCH_IDENTIFIERS or "out of bounds" in condition:
        return "foreign"
    return None


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
