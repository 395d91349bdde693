"""One table of CUDA, NCCL and NVSHMEM error codes, and :func:`decode`: the cause another error's text carries.

An error of one layer often names its cause in another's words: NCCL's ``NCCL WARN Cuda failure 'out of memory'``
and ``Failed to CUDA calloc <n> bytes`` (NVIDIA/nccl src/include/alloc.h, checks.h ``CUDACHECK``), the payload of
``ncclUnhandledCudaError`` after ``Last error:`` (PyTorch prints ``ncclGetLastError``), NVSHMEM's
``<file>:<line>: non-zero status: <n> <what> failed`` (nvshmem src/include/internal/host/util.h
``NVSHMEMI_NZ_ERROR_JMP``) and ``cuda failed with <cudaGetErrorString>``, DeepEP's ``Failed: CUDA error <file>:<line>
'<cudaGetErrorString>'`` (deepseek-ai/DeepEP csrc/kernels/exception.cuh ``CUDA_CHECK``), PyTorch's ``CUDA error:
<string>`` (c10/cuda/CUDAException.h). The decoded cause, not the wrapper, says what to do: an NCCL error whose cause
is an out-of-memory is a memory problem (not retriable), not a network one.

Codes (the CUDA runtime's ``cudaError_t`` and the driver's ``CUresult`` share these values; NVSHMEM returns the
driver's result of ``cuMemCreate``/``cuMemMap`` and its own ``nvshmemx_status``: 2 out of memory, read only from a
heap or allocation function, since its transport code returns the internal ``nvshmemResult_t`` where 2 is a system
error; 7 internal):
2 out of memory -> ``cuda_oom``; 700 illegal address, 716 misaligned address, 715 illegal instruction, 719 launch
failure, 1 invalid argument, 400 invalid resource handle -> ``cuda_error``; 710 device-side assert -> ``assertion``;
214 uncorrectable ECC, 999 unknown error after an Xid -> ``hardware_failure`` (214 only: 999 stays ``cuda_error``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# code -> (name, the string cudaGetErrorString prints, reason); CUDA 12 driver_types.h / cuda.h values
CUDA: dict[int, tuple[str, str, str]] = {
    1: ("cudaErrorInvalidValue", "invalid argument", "cuda_error"),
    2: ("cudaErrorMemoryAllocation", "out of memory", "cuda_oom"),
    214: ("cudaErrorECCUncorrectable", "uncorrectable ECC error encountered", "hardware_failure"),
    400: ("cudaErrorInvalidResourceHandle", "invalid resource handle", "cuda_error"),
    700: ("cudaErrorIllegalAddress", "an illegal memory access was encountered", "cuda_error"),
    710: ("cudaErrorAssert", "device-side assert triggered", "assertion"),
    715: ("cudaErrorIllegalInstruction", "an illegal instruction was encountered", "cuda_error"),
    716: ("cudaErrorMisalignedAddress", "misaligned address", "cuda_error"),
    719: ("cudaErrorLaunchFailure", "unspecified launch failure", "cuda_error"),
    999: ("cudaErrorUnknown", "unknown error", "cuda_error"),
}
_BY_STRING = {text.lower(): (code, reason) for code, (_, text, reason) in CUDA.items()}
_BY_NAME = {name.lower(): code for code, (name, _, _) in CUDA.items()}
_BY_NAME.update({"cuda_error_out_of_memory": 2, "cuda_error_illegal_address": 700, "cuda_error_assert": 710,
                 "cuda_error_launch_failed": 719, "cuda_error_ecc_uncorrectable": 214,
                 "cuda_error_misaligned_address": 716, "cuda_error_illegal_instruction": 715})
# nvshmemx_status (nvshmem include/non_abi/nvshmemx_error.h, NVSHMEM 3.x: SUCCESS 0, INVALID_VALUE 1,
# OUT_OF_MEMORY 2, ...): its own codes where no CUDA call is named
NVSHMEM: dict[int, tuple[str, str | None]] = {
    1: ("NVSHMEMX_ERROR_INVALID_VALUE", None), 2: ("NVSHMEMX_ERROR_OUT_OF_MEMORY", "cuda_oom"),
    3: ("NVSHMEMX_ERROR_NOT_SUPPORTED", None), 4: ("NVSHMEMX_ERROR_SYMMETRY", None),
    5: ("NVSHMEMX_ERROR_GPU_NOT_SELECTED", None), 6: ("NVSHMEMX_ERROR_COLLECTIVE_LAUNCH_FAILED", None),
    7: ("NVSHMEMX_ERROR_INTERNAL", None),
}
# the forms that carry a cause: a CUDA string in quotes, an allocation failure, a status code, a CUDA error name
_QUOTED = re.compile(r"(?:Cuda failure|Failed: (?:CUDA|CU) error \S+|Last error:?)\s*(?P<code>\d+)?\s*'(?P<text>[^']+)'",
                     re.I)
_CUDA_WITH = re.compile(r"\bcuda failed with (?P<text>[a-z][\w ,-]+?)\s*$|\bCUDA error: (?P<text2>[a-z][\w ,-]+?)(?:\s*$|\n)",
                        re.I)
_ALLOC = re.compile(r"Failed to CUDA (?:calloc|malloc|host alloc|cuMem\w+)|\bcuMem(?:Create|Alloc|Map)\w* failed",
                    re.I)
_STATUS = re.compile(r"non-zero status: (?P<status>-?\d+)(?: (?P<call>\w+) failed)?")
# NVSHMEM's transport code returns its internal nvshmemResult_t (2: system error) through the same macro: a status 2
# is read as out of memory only from a heap or allocation function
_MEMORY_CALL = re.compile(r"heap|alloc|malloc|mem", re.I)
_NAME = re.compile(r"\b(?P<name>cudaError\w+|CUDA_ERROR_\w+)\b")


@dataclass(frozen=True, slots=True)
class Cause:
    """A decoded inner cause: the ``reason`` it means, its CUDA/NVSHMEM ``code`` (None when only a string was
    printed), the ``cause`` as printed and the ``layer`` that wrapped it (cuda | nccl | nvshmem | deepep)."""

    reason: str
    code: int | None
    cause: str
    layer: str


def _layer(text: str) -> str:
    low = text.lower()
    return ("nvshmem" if "nvshmem" in low or "non-zero status" in low else "nccl" if "nccl" in low or
            "cuda failure" in low or "failed to cuda" in low else "deepep" if "failed: cu" in low else "cuda")


def _from_string(text: str) -> tuple[int | None, str] | None:
    t = text.strip().rstrip(".").lower()
    for known, (code, reason) in _BY_STRING.items():
        if t.startswith(known) or known in t:
            return code, reason
    return None


def decode(text: str) -> Cause | None:
    """The cause carried inside ``text`` (one log line, prefixes allowed), or None when it names none.

    A status code decodes only with the CUDA call it names (``cuMemCreate`` returned 2: out of memory) or as
    NVSHMEM's own out-of-memory status; NVSHMEM's internal status 7 wraps an earlier line's cause and decodes to
    nothing."""
    q = _QUOTED.search(text)
    if q is not None:
        hit = _from_string(q.group("text"))
        code = int(q.group("code")) if q.group("code") else None
        if hit is None and code in CUDA:
            hit = code, CUDA[code][2]
        if hit is not None:
            return Cause(hit[1], hit[0] if hit[0] is not None else code, q.group("text"), _layer(text))
    if _ALLOC.search(text):
        return Cause("cuda_oom", 2, "out of memory", _layer(text))
    s = _STATUS.search(text)
    if s is not None:
        status = int(s.group("status"))
        if s.group("call") and s.group("call").startswith("cu") and status in CUDA:
            return Cause(CUDA[status][2], status, CUDA[status][1], "nvshmem")
        reason = NVSHMEM.get(status, ("", None))[1]
        if reason is not None and _MEMORY_CALL.search(s.group("call") or ""):
            return Cause(reason, status, NVSHMEM[status][0], "nvshmem")
    w = _CUDA_WITH.search(text)
    if w is not None:
        hit = _from_string(w.group("text") or w.group("text2"))
        if hit is not None:
            return Cause(hit[1], hit[0], (w.group("text") or w.group("text2")).strip(), _layer(text))
    n = _NAME.search(text)
    if n is not None and n.group("name").lower() in _BY_NAME:
        code = _BY_NAME[n.group("name").lower()]
        return Cause(CUDA[code][2], code, n.group("name"), _layer(text))
    return None
