"""The failure-signature catalogue: data only (matched by ``analysis.logs.catalogue``; reasons: ``analysis.judge.classify``).

``FAMILIES``: family -> whether its failures are worth retrying (``retriable``) and what the family means.
``SIGNATURES``: (family, reason, triggers, pattern, source), grouped by family, specific entries first and a
fallback last in each family; across families, more specific families come first. A line gets the FIRST entry
whose pattern matches it (all entries are tried in one RE2 set pass).

- ``triggers``: lower-case literals; every match of ``pattern``, lower-cased, holds one of them (the parser's
  byte-needle pass only hands on lines holding a trigger; tests/analysis/test_signatures.py checks this).
- ``pattern``: RE2 and Python ``re`` syntax at once (no look-around, no back-references); ``(?i)`` in front
  for case-insensitive. Named groups become run details: ``signal``, ``signal_word``, ``signum``, ``op``,
  ``seq``, ``timeout_ms``, ``ran_for_ms``, ``nccl_code``, ``xid``, ``host``, ``tasks``, ``exit_code``,
  ``location``, ``condition``, ``state``, ``tokens``.
- ``source``: where the wording comes from: the library file that prints it, or the public issue it was seen in.
  Error-message text is quoted only for recognition.
"""

from __future__ import annotations

FAMILIES: dict[str, dict[str, object]] = {
    "dispatcher_fallback": {"retriable": False, "about": "the flex backend was not used: the variant is not its label"},
    "launch": {"retriable": False, "about": "the launch layer below Python: a container that fails to import or "
                                            "start (pyxis, enroot), a SPANK plugin, the prolog/epilog, the exec of "
                                            "the program; and the launcher's own RPC errors, which stop nothing"},
    "dispatcher_kernel": {"retriable": False, "about": "DeepEP/HybridEP kernel or set-up failure (assertion, CUDA "
                                                     "error, NVSHMEM bootstrap, package missing, capacity)"},
    "dispatcher_timeout": {"retriable": True, "about": "DeepEP/HybridEP CPU- or GPU-side timeout"},
    "hardware": {"retriable": True, "about": "GPU/node hardware: uncorrectable ECC, Xid, fallen off the bus, "
                                             "NODE_FAIL"},
    "memory": {"retriable": False, "about": "CUDA caching-allocator OOM or a host/cgroup OOM kill"},
    "preemption": {"retriable": True, "about": "the scheduler preempted or requeued the job"},
    "numerics": {"retriable": False, "about": "NaN/Inf in loss or grad norm"},
    "assertion": {"retriable": False, "about": "Python AssertionError, C/CUDA assertion, config asserts"},
    "cuda": {"retriable": False, "about": "a CUDA runtime error outside the dispatcher (illegal address ...)"},
    "network": {"retriable": True, "about": "NCCL/c10d errors and timeouts, IB/socket transport errors"},
    "signal": {"retriable": False, "about": "a rank killed by a signal (SIGSEGV, SIGABRT, SIGBUS ...)"},
    "scheduler": {"retriable": False, "about": "Slurm time limit, cancel, task exit codes"},
}

_DEEPEP_SRC = "deepseek-ai/DeepEP csrc/kernels/{internode,intranode,internode_ll}.cu, csrc/deep_ep.cpp (hybrid-ep " \
              "branch, commit 94a9f8f6)"
_HYBRIDEP_SRC = "deepseek-ai/DeepEP hybrid-ep csrc/hybrid_ep/extension/allgather.cu, buffer/nixl_connector.cu"
_PG_NCCL = "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
_STEPD = "SchedMD/slurm src/slurmd/slurmstepd/req.c (_handle_signal_container)"
# dispatcher words: DeepEP, deep_ep, HybridEP, hybrid_ep, HYBRID-EP, Megatron's fused_a2a wrapper, NVSHMEM/NIXL
_DISP = r"(?:deep[_ ]?ep|hybrid[-_ ]?ep|fused_a2a|nixl)"

SIGNATURES: tuple[tuple[str, str, tuple[str, ...], str, str], ...] = (
    # ---- dispatcher fallback (CASES C05)
    ("dispatcher_fallback", "dispatcher_fallback", ("falling back to alltoall",),
     r"(?i)falling back to alltoall",
     "NVIDIA-NeMo/Megatron-Bridge issue 5992; src/megatron/bridge/training/flex_dispatcher_backend.py"),
    # ---- the launch layer: the run never reached Python (its lines come from slurmstepd/srun, pyxis, enroot)
    ("launch", "launch_failure", ("pyxis: ", "enroot"),
     r"(?i)\bpyxis: +(?:\[ERROR\]|.*\b(?:fail(?:ed|ure)?|couldn't|could not|unable to|error code)\b)"
     r"|\benroot(?:-[\w-]+)?: (?:\[ERROR\]|error|.*\bfailed\b)",
     "NVIDIA/pyxis src/pyxis_slurmstepd.c ('pyxis: failed to import docker image', 'pyxis: couldn't start "
     "container', 'container start failed with error code'); NVIDIA/enroot ('enroot-switchroot: failed to "
     "execute'); pyxis issues 61, 62, 78"),
    ("launch", "launch_failure", ("spank",),
     r"(?i)\bspank: .*\b(?:failed|error)\b|Failed to invoke spank plugin stack",
     "SchedMD/slurm src/common/spank.c ('spank: required plugin %s: %s() failed with rc=%d', "
     "'Failed to invoke spank plugin stack')"),
    ("launch", "launch_failure", ("prolog", "epilog"),
     r"(?i)\b(?:job |task )?(?:prolog|epilog)(?:_slurmctld)?\b.{0,40}\b(?:failed|error)\b",
     "SchedMD/slurm src/common/slurm_errno.c (ESLURMD_PROLOG_FAILED 'Job prolog failed', ESLURMD_EPILOG_FAILED)"),
    ("launch", "launch_failure", ("execve(): ", "task launch for ", "application launch failed",
                                  "unable to create step", "unable to allocate resources", "command not found",
                                  "no such file or directory", "permission denied"),
     r"execve\(\): .*: (?:No such file or directory|Permission denied|Exec format error)"
     r"|Task launch for StepId=\S+ failed on node|Application launch failed"
     r"|(?:srun|sbatch|salloc): error: Unable to (?:create step for job|allocate resources)"
     r"|(?:\b(?:bash|sh|zsh)|\S*slurm_script|\S+\.sh)(?:: line \d+)?: (?:\S*/)?(?:python[\d.]*|torchrun|srun|nsys"
     r"|\S+\.(?:sh|py)): "
     r"(?:command not found|No such file or directory|Permission denied)",
     "SchedMD/slurm src/slurmd/slurmstepd/exec (execve(): %s: %m), src/srun/launch ('Task launch for StepId=%s "
     "failed on node %s: %s', 'Application launch failed: %s', 'Unable to create step for job %u: %m'); "
     "bash ('<name>: command not found') for the job script's own command"),
    # slurmstepd's and srun's own RPC errors while a step ends (a controller or srun already gone): no failure of
    # the run, and no NCCL error (first entry wins, so they come before the network family's "connection refused")
    ("launch", "slurm_rpc_error", ("failed to send message_", "slurm_receive_msg", "connection refused",
                                   "socket timed out", "transport endpoint", "unable to ", "connection reset by peer"),
     r"(?:slurmstepd|srun|slurmd|salloc)(?:\[\d+\])?: error: (?:Failed to send MESSAGE_\w+|slurm_receive_msgs?\b"
     r"|Unable to \w+|.*\b(?:Connection refused|Socket timed out|Transport endpoint is not connected"
     r"|Connection reset by peer))",
     "SchedMD/slurm src/slurmd/slurmstepd/mgr.c ('Failed to send MESSAGE_TASK_EXIT: %m'), src/common/slurm_protocol_api.c"),
    # ---- dispatcher kernels and set-up
    ("dispatcher_kernel", "flex_kernel_assertion", ("assertion failed: ",),
     r"Assertion failed: (?P<location>[^\s,]*(?:csrc/kernels|deep_?ep|DeepEP|hybrid_?ep|internode|intranode)[^\s,]*)"
     r"(?:, condition: (?P<condition>.*))?",
     "deepseek-ai/DeepEP csrc/kernels/exception.cuh EP_DEVICE_ASSERT; DeepEP issue 226 (CASES C06)"),
    ("dispatcher_kernel", "flex_kernel_assertion", ("failed: assertion error",),
     r"Failed: Assertion error (?P<location>\S+) '(?P<condition>[^']*)'",
     "deepseek-ai/DeepEP csrc/kernels/exception.cuh EPException / EP_HOST_ASSERT"),
    ("dispatcher_kernel", "flex_kernel_error", ("invalid ", "max_num_of_tokens_per_rank"),
     r"(?i)Invalid \S+: max_num_of_tokens_per_rank=(?P<tokens>\d+) exceeds the supported maximum",
     "deepseek-ai/DeepEP hybrid-ep csrc/hybrid_ep/config.cuh hybrid_ep_token_capacity_is_valid"),
    ("dispatcher_kernel", "flex_kernel_error", ("failed: cuda error", "failed: cu error"),
     r"Failed: (?:CUDA|CU) error (?P<location>\S+) '(?P<condition>[^']*)'",
     "deepseek-ai/DeepEP csrc/kernels/exception.cuh CUDA_CHECK / CU_CHECK"),
    ("dispatcher_kernel", "flex_kernel_error", ("illegal memory access", "illegal address", "misaligned address",
                                                "device-side assert", "unspecified launch failure"),
     r"(?i)" + _DISP + r".*(?:illegal memory access|illegal address|misaligned address|device-side assert"
     r"|unspecified launch failure)|(?:illegal memory access|illegal address|misaligned address|device-side assert"
     r"|unspecified launch failure).*" + _DISP,
     "deepseek-ai/DeepEP issues 205, 283 (illegal memory access in internode dispatch)"),
    # NVSHMEM's settings dump (NVSHMEM_INFO=1: "NVSHMEM_ENABLE_ERROR_CHECKS false (type: bool, default: false)"):
    # option names, not errors (first entry wins, so it comes before nvshmem_init)
    ("dispatcher_kernel", "nvshmem_config", ("(type: ",),
     r"NVSHMEM_\w+ .*\(type: \w+, default: ",
     "NVSHMEM env info dump (nvshmem src/host/util/env_vars, printed with NVSHMEM_INFO=1); DeepEP issue 289"),
    ("dispatcher_kernel", "nvshmem_init", ("nvshmem",),
     r"(?i)nvshmem\w*.*(?:error|fail|abort)|(?:error|fail).*nvshmem",
     "NVSHMEM bootstrap (nvshmemi_bootstrap, nvshmem_init) as DeepEP internode / HybridEP report it"),
    ("dispatcher_kernel", "dispatcher_unavailable", ("deepep", "hybridep", "nccl ep", "ncclep", "deep_ep"),
     r"\b(?:DeepEP|HybridEP|NCCL ?EP|deep_ep)\b.*\bnot installed",
     "Megatron-Bridge flex_dispatcher_backend.py / Megatron-Core fused_a2a.py import checks (FACTS §1)"),
    # ---- dispatcher timeouts (CASES C07): CPU-side, GPU-side receivers/senders/forwarders, HybridEP, NIXL
    ("dispatcher_timeout", "dispatcher_timeout", ("deepep error: timeout", "deepep error: cpu recv timeout"),
     r"DeepEP error: (?:CPU recv timeout|timeout \((?P<op>\w+) CPU\))",
     "deepseek-ai/DeepEP csrc/deep_ep.cpp (NUM_CPU_TIMEOUT_SECS); Megatron-Bridge issues 1335, 2166, 5067"),
    ("dispatcher_timeout", "dispatcher_timeout", ("hybrid-ep allgather timeout", "hybrid_ep allgather timeout",
                                                  "hybridep allgather timeout"),
     r"(?i)HYBRID[-_]?EP ALLGATHER TIMEOUT", _HYBRIDEP_SRC),
    ("dispatcher_timeout", "dispatcher_timeout", ("deepep",),
     r"(?i)DeepEP (?:dispatch|combine|RDMA|NVL|timeout|low.latency)[\w (),/-]*?time(?:d)?[ -]?out",
     _DEEPEP_SRC + "; DeepEP PR 181 ('DeepEP dispatch NVL receiver timeout, channel: ...')"),
    ("dispatcher_timeout", "dispatcher_timeout", ("timeout", "timed out", "time out", "timed-out", "time-out", "timedout"),
     r"(?i)" + _DISP + r".*\btime(?:d)?[ -]?out|\btime(?:d)?[ -]?out\b.*" + _DISP,
     "family fallback: any timeout inside a DeepEP/HybridEP/NIXL message (" + _DEEPEP_SRC + ")"),
    # ---- hardware
    ("hardware", "node_failure", ("due to node fail",),
     r"\*\*\* (?:JOB|STEP) \S+ (?:ON (?P<host>\S+) )?CANCELLED AT \S+ DUE TO NODE FAIL", _STEPD),
    ("hardware", "node_failure", ("node failure on", "node_fail", "boot_fail"),
     r"Node failure on (?P<host>[\w.-]+)|\bNODE_FAIL\b|\bBOOT_FAIL\b",
     "SchedMD/slurm srun/sbatch 'Node failure on %s'; sacct JOB STATE CODES"),
    # the code follows the optional PCI address: "NVRM: Xid (PCI:0000:3b:00): 79, pid=...", older drivers
    # "NVRM: Xid (0000:3b:00): 79, ...", DCGM / monitoring "XID error 79", "Xid 79", "xid=79", "Xid: 79"
    ("hardware", "hardware_failure", ("xid",),
     r"(?i)\bXid\b(?: errors?)?(?:\s*\((?:PCI:)?[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-9a-f])?\))?"
     r"\s*(?:[:=#]|error|code)?\s*(?P<xid>\d{1,3})\b",
     "NVIDIA driver NVRM Xid messages, 'NVRM: Xid (PCI:%04x:%02x:%02x): %d, ...' (docs.nvidia.com/deploy/xid-errors); "
     "NCCL issue 1610 comments"),
    ("hardware", "hardware_failure", ("ecc", "fallen off the bus", "uncorrectable", "row remap", "page retirement",
                                      "hardware error", "nvlink error"),
     r"(?i)uncorrectable (?:ECC|memory|NVLink)? ?error|\bECC error|ECC_UNCORRECTABLE|ECCUncorrectable"
     r"|fallen off the bus|row remap\w* fail|page retirement|hardware error|NVLink error",
     "CUDA runtime cudaErrorECCUncorrectable ('uncorrectable ECC error encountered'); NVIDIA Xid 48/63/79/94/95"),
    # ---- memory
    ("memory", "cuda_oom", ("out of memory", "outofmemoryerror", "cudaerrormemoryallocation",
                            "cuda_error_out_of_memory"),
     r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation"
     r"|CUDA_ERROR_OUT_OF_MEMORY|\bout of memory\b.*\bGPU\b",
     "pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp ('CUDA out of memory. Tried to allocate ...')"),
    # slurmstepd's accounting warning kills nothing: the cgroup's memory limit was reached (failcnt > 0) at some
    # point, page cache included; it is no OOM kill (first entry wins, so it comes before host_oom)
    ("memory", "memory_limit_warning", ("at some point",),
     r"(?i)Exceeded (?:job|step) memory limit at some point",
     "SchedMD/slurm src/plugins/task/cgroup/task_cgroup_memory.c ('Exceeded %s memory limit at some point.', "
     "logged when memory.failcnt > 0, without a kill)"),
    # a kill: the cgroup's oom_kill events, jobacct_gather's over-limit kill, srun's task state, the kernel's OOM
    # killer (dmesg), sacct's OUT_OF_MEMORY state
    ("memory", "host_oom", ("oom_kill event", "oom-kill event", "oom killed", "oom-killed", "out of memory",
                            "being killed", "out_of_memory", "oom-killer", "killed process", "oom-kill:"),
     r"(?i)Detected \d+ oom[-_]kill events?|oom[- ]killed|task \S+: Out Of Memory"
     r"|exceeded (?:job |step )?memory limit \([^)]*\),? being killed|\bOUT_OF_MEMORY\b|oom-killer"
     r"|Memory cgroup out of memory|Killed process \d+|Out of memory: Kill|oom-kill:",
     "SchedMD/slurm src/plugins/cgroup/v2 ('Detected %lu oom_kill event%s in %ps'), "
     "src/plugins/jobacct_gather/common ('Step %s exceeded memory limit (%lu > %lu), being killed'), srun task "
     "state 'Out Of Memory'; Linux mm/oom_kill.c ('Out of memory: Killed process %d', 'oom-kill:')"),
    # ---- preemption and requeue
    ("preemption", "preempted", ("due to preemption", "due to job requeue"),
     r"\*\*\* (?:JOB|STEP) \S+ (?:ON (?P<host>\S+) )?CANCELLED AT \S+ DUE TO (?P<state>PREEMPTION|JOB REQUEUE)",
     _STEPD),
    ("preemption", "preempted", ("preempted", "requeue"),
     r"\bPREEMPTED\b|\bREQUEUED\b|(?i:job \S+ (?:has been |was )?(?:preempted|requeued))|(?i:requeue(?:d|ing) job)",
     "SchedMD/slurm sacct JOB STATE CODES; slurmctld 'Requeuing JobId=...'"),
    # ---- numerics
    ("numerics", "nan_inf", ("found nan", "nan or inf", "nan detected", "inf detected", "unexpected result nan",
                             "unexpected result inf", "detected nan", "detected inf", "found inf", "is nan",
                             "is inf", "nan/inf", "non-finite", "nan in", "inf in", "found a nan",
                             "found a inf", "detected a nan", "detected a inf", "loss: nan", "loss: inf",
                             "loss: -nan", "loss: +nan", "loss: -inf", "loss: +inf", "norm: nan", "norm: inf", "norm: -nan", "norm: +nan",
                             "norm: -inf", "norm: +inf"),
     r"(?i)found (?:a )?(?:NaN|Inf)|NaN or Inf|(?:NaN|Inf) detected|detected (?:a )?(?:NaN|Inf)|Unexpected result "
     r"(?:nan|inf)|\bis (?:NaN|Inf)\b|NaN/Inf|non-finite|\b(?:NaN|Inf) in (?:local |global )?(?:grad|loss)"
     r"|\| (?:[a-z0-9_ ]*loss|grad norm): [-+]?(?:nan|inf)\b",
     "NVIDIA/Megatron-LM megatron/core/distributed/param_and_grad_buffer.py ('found NaN in local grad norm'), "
     "megatron/core/rerun_state_machine.py ('Unexpected result nan'); megatron/training/training.py "
     "training_log (an iteration line whose 'lm loss' or 'grad norm' field prints NAN/INF, on the rank's prefix)"),
    # ---- assertions
    ("assertion", "assertion", ("assertion failed: ", "assertion `", "assertion '"),
     r"Assertion failed: (?P<location>[^,]+?)(?:, condition: (?P<condition>.*))?$"
     r"|(?P<location2>[^\s\[\]]+:\d+): .*Assertion [`'](?P<condition2>.*)[`'] failed"
     r"|Assertion [`'](?P<condition3>.*)[`'] failed",
     "glibc assert(3) ('file:line: func: Assertion `cond' failed.'); CUDA device assert ('Assertion `cond` failed.')"),
    ("assertion", "assertion", ("assertionerror",),
     r"\bAssertionError\b",
     "Python AssertionError from Megatron-Core TransformerConfig / Megatron-Bridge config checks (fixture "
     "h200_mbridge_overlap_ep1_bridge_assert.log)"),
    ("assertion", "assertion", ("device-side assert",),
     r"(?i)device-side assert(?:ion)? triggered", "CUDA runtime cudaErrorAssert ('device-side assert triggered')"),
    # ---- CUDA runtime errors outside the dispatcher
    ("cuda", "cuda_error", ("illegal memory access", "illegal address", "misaligned address",
                            "unspecified launch failure", "illegal instruction", "cublas_status_execution_failed",
                            "cudaerror", "cuda error: ", "cuda_error_"),
     r"(?i)illegal memory access|illegal address|misaligned address|unspecified launch failure"
     r"|illegal instruction was encountered|CUBLAS_STATUS_EXECUTION_FAILED|cudaError\w+|CUDA error: |CUDA_ERROR_\w+",
     "CUDA runtime error strings (cudaGetErrorString) as PyTorch's C10_CUDA_CHECK prints them"),
    # the forms that carry a CUDA cause inside another library's error (analysis.logs.codes decodes them): NCCL's
    # "Cuda failure '<string>'" and "Failed to CUDA calloc", NVSHMEM's "cuda failed with" and a CUDA call's status
    ("cuda", "cuda_error", ("cuda failure", "failed to cuda", "cuda failed with", "non-zero status: "),
     r"(?i)Cuda failure (?:\d+ )?'[^']*'|Failed to CUDA (?:calloc|malloc|host alloc)|cuda failed with "
     r"|non-zero status: -?\d+ cu\w+ failed",
     "NVIDIA/nccl src/include/alloc.h, checks.h (CUDACHECK 'Cuda failure %d '%s''); nvshmem util.h "
     "(NVSHMEMI_NZ_ERROR_JMP 'non-zero status: %d'); NVIDIA/nccl issue 1235"),
    # ---- NCCL / network
    ("network", "nccl_timeout", ("watchdog caught collective operation timeout", "worknccl(seqnum="),
     r"Watchdog caught collective operation timeout|WorkNCCL\(SeqNum=\d+.*Timeout\(ms\)",
     _PG_NCCL + " (checkTimeout); NCCL issue 1610 (CASES C09)"),
    ("network", "nccl_timeout", ("watchdog got stuck", "heartbeat monitor timed out", "watchdog hang",
                                 "some nccl operations have failed or timed out"),
     r"(?i)watchdog got stuck for (?P<stuck_s>\d+) seconds|Heartbeat monitor timed out|watchdog hang"
     r"|Some NCCL operations have failed or timed out",
     _PG_NCCL + " (HeartbeatMonitor, 'ProcessGroupNCCL's watchdog got stuck for 480 seconds')"),
    ("network", "nccl_error", ("ncclremoteerror", "ncclsystemerror", "ncclinternalerror", "nccl error",
                               "ncclunhandledcudaerror", "ncclinvalidusage", "ncclinvalidargument"),
     r"(?i)(?P<nccl_code>nccl(?:Remote|System|Internal|UnhandledCuda|InvalidUsage|InvalidArgument)Error)"
     r"|NCCL error",
     "NVIDIA/nccl src/misc/ (ncclGetErrorString); " + _PG_NCCL + " ('NCCL error in: ...')"),
    ("network", "nccl_error", ("net/ib", "net/socket", "ibv_", "ibv_wc_", "net/ofi", "net/gin"),
     r"(?i)NET/(?:IB|Socket|OFI|IB/GIN)\s*:.*(?:error|fail|completion|abort|timeout|unable|refused|reset)"
     r"|ibv_\w+ failed|IBV_WC_\w+_ERR",
     "NVIDIA/nccl src/transport/net_ib.cc ('NET/IB: Got completion from peer %s with status=...')"),
    ("network", "nccl_error", ("diststoreerror", "distnetworkerror", "rendezvoustimeouterror",
                               "connection reset by peer", "socket timeout", "connection refused", "broken pipe"),
     r"DistStoreError|DistNetworkError|RendezvousTimeoutError|(?i:connection reset by peer|socket timeout"
     r"|connection refused|\[c10d\].*broken pipe)",
     "pytorch/pytorch torch/csrc/distributed/c10d/TCPStore.cpp, socket.cpp; torch elastic rendezvous"),
    ("network", "nccl_timeout", ("timeout", "timed out", "time out", "timedout", "time-out", "timed-out"),
     r"(?i)\bnccl\w*\b.*\btime(?:d)?[ -]?out", "family fallback: a timeout in an NCCL message"),
    ("network", "nccl_error", ("nccl warn", "abort", "fail"),
     r"NCCL WARN .*(?i:error|fail|abort|unable|could not)|(?i:\bnccl\w*\b[^.]{0,60}\b(?:abort(?:ed)?|fail(?:ed|ure)?)\b)",
     "family fallback: NVIDIA/nccl WARN lines, an NCCL object that failed or aborted (not a warning that mentions "
     "an error)"),
    # ---- killed by a signal (the name becomes part of the reason)
    ("signal", "killed_by_signal", ("received by pid", ") received"),
     r"Signal (?P<signum>\d+) \((?P<signal>SIG\w+)\) received by PID|\*\*\* (?P<signal2>SIG\w+) \(@\S+\) received",
     "pytorch/pytorch torch/distributed/elastic/multiprocessing/api.py ('Signal %d (%s) received by PID'); "
     "glog failure signal handler"),
    ("signal", "killed_by_signal", ("fatal python error: ",),
     r"Fatal Python error: (?P<signal_word>Segmentation fault|Aborted|Bus error|Floating point exception"
     r"|Illegal instruction)", "CPython faulthandler"),
    ("signal", "killed_by_signal", ("srun: error: ",),
     r"srun: error: (?P<host>\S+): tasks? (?P<tasks>[\d,\-\[\]]+): (?P<signal_word>Segmentation fault|Aborted"
     r"|Bus error|Killed|Terminated|Floating point exception|Illegal instruction)",
     "SchedMD/slurm src/srun/step_ctx / launch.c task exit reporting (strsignal)"),
    ("signal", "killed_by_signal", ("segmentation fault", "aborted", "bus error", " killed", "terminated",
                                    "got signal: ", "death signal"),
     r"(?P<signal_word>Segmentation fault|Aborted|Bus error) \(core dumped\)|\bline \d+: +\d+ (?P<signal_word2>Killed|"
     r"Segmentation fault|Aborted|Terminated)\b|got signal: (?P<signum2>\d+)"
     r"|Received (?:Signals\.)?(?P<signal3>SIG\w+) death signal|Received (?P<signum3>\d+) death signal",
     "bash job-control messages; torch elastic SignalException ('Process %d got signal: %d'), agent "
     "(torch/distributed/elastic/agent/server/api.py run: 'Received %s death signal, shutting down workers', "
     "the Signals enum as Python formats it: 'Signals.SIGTERM' or, since Python 3.11, '15')"),
    ("signal", "killed_by_signal", ("by signal ", "with signal ", "signals.sig"),
     r"(?i:(?:killed|terminated|exited|stopped) (?:by|with) signal) (?P<signum>\d+)\b"
     r"|(?i:\b(?:got|received|with|by|on|caught) (?:signal:? )?)Signals\.(?P<signal>SIG[A-Z0-9]+)\b",
     "POSIX wait status texts ('terminated by signal 15'); Python's signal.Signals enum repr in torch elastic "
     "messages ('Signals.SIGTERM')"),
    # ---- scheduler
    ("scheduler", "slurm_time_limit", ("due to time limit", "time limit exceeded", "timelimit exceeded",
                                       "exceeded its time limit"),
     r"DUE TO TIME LIMIT|(?i:time ?limit exceeded)|has exceeded its time limit",
     _STEPD + "; SchedMD/slurm src/salloc, src/srun ('Job %u has exceeded its time limit and its allocation has "
     "been revoked.'); FACTS §6 (CASES C08)"),
    ("scheduler", "cancelled", ("cancelled",),
     r"\*\*\* (?:JOB|STEP) \S+ (?:ON (?P<host>\S+) )?CANCELLED AT (?P<at>\S+) \*\*\*|\bCANCELLED\b.*\bby\b",
     _STEPD + " (a cancel without 'DUE TO': scancel, or the scheduler; the scheduler state decides)"),
    ("scheduler", "task_exit_code", ("due to task failure",),
     r"\*\*\* (?:JOB|STEP) \S+ (?:ON (?P<host>\S+) )?CANCELLED AT (?P<at>\S+) DUE TO TASK FAILURE",
     _STEPD + " (newer releases: the step cancelled because one of its tasks failed; a consequence, the task's "
     "own failure is the cause: analysis.judge.launch_context)"),
    ("scheduler", "cancelled", ("cancelled at ",),
     r"\*\*\* (?:JOB|STEP) \S+ (?:ON (?P<host>\S+) )?CANCELLED AT (?P<at>\S+) DUE TO (?P<state>[A-Z][A-Z_ ]*[A-Z])",
     _STEPD + " (the grammar 'CANCELLED AT <t>( DUE TO <REASON>)?': a reason this catalogue names nowhere else)"),
    ("scheduler", "task_exit_code", ("srun: error: ", "job exited with code"),
     r"srun: error: (?P<host>\S+): tasks? (?P<tasks>[\d,\-\[\]]+): Exited with exit code (?P<exit_code>\d+)"
     r"|job exited with code (?P<exit_code2>\d+)",
     "SchedMD/slurm srun ('task %s: Exited with exit code %d'); NeMo-Run batch trailer (FACTS §5)"),
)
