"""Small builders shared by the planner tests."""

from __future__ import annotations

from typing import Any

from experiments.rules import RuleContext, parse_version

TINY = dict(
    num_layers=4, hidden_size=512, num_attention_heads=8, num_query_groups=4, kv_channels=64, ffn_hidden_size=1536,
    moe_ffn_hidden_size=512, num_moe_experts=8, moe_router_topk=2, vocab_size=32000,
    moe_shared_expert_intermediate_size=None, moe_shared_expert_overlap=False, mtp_num_layers=None,
    add_bias_linear=False, add_qkv_bias=False, tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
    virtual_pipeline_model_parallel_size=None, context_parallel_size=1, expert_model_parallel_size=8,
    expert_tensor_parallel_size=1, sequence_parallel=False, num_layers_in_first_pipeline_stage=None,
    num_layers_in_last_pipeline_stage=None, account_for_embedding_in_pipeline_split=False,
    account_for_loss_in_pipeline_split=False, seq_length=1024, global_batch_size=64, micro_batch_size=1,
    recompute_granularity=None, recompute_method=None, recompute_num_layers=None, recompute_modules=None,
    bf16=True, fp16=False, cuda_graph_impl="none", cuda_graph_scope=[], overlap_grad_reduce=False,
    gradient_accumulation_fusion=False, moe_router_force_load_balancing=True,
)


def settings(dispatcher: str = "alltoall", overlap: bool = True, delay_wgrad: bool = False, **over: Any) -> dict:
    flex = dispatcher in ("deepep", "hybridep", "ncclep")
    s = dict(TINY)
    s.update(moe_token_dispatcher_type="flex" if flex else dispatcher,
             moe_flex_dispatcher_backend=dispatcher if flex else None,
             overlap_moe_expert_parallel_comm=overlap, delay_wgrad_compute=delay_wgrad)
    s.update(over)
    return s


def ctx(dispatcher: str = "alltoall", overlap: bool = True, delay_wgrad: bool = False, *, torch: str = "2.11.0",
        te: str | None = "2.12.0", core: str = "0.19.2", deep_ep: str | None = "1.2.1", gpu: str | None = "h100",
        world: int | None = 8, nodes: int = 1, env: dict | None = None, **over: Any) -> RuleContext:
    return RuleContext(settings=settings(dispatcher, overlap, delay_wgrad, **over), dispatcher=dispatcher,
                       overlap=overlap, delay_wgrad=delay_wgrad, torch=parse_version(torch), te=parse_version(te),
                       core=parse_version(core), deep_ep=parse_version(deep_ep), gpu_type=gpu, world_size=world,
                       nodes=nodes, env=env if env is not None else {"CUDA_DEVICE_MAX_CONNECTIONS": "32"})


class UnscriptedBackend:
    """The :class:`launchers.backend.Backend` methods a scripted test backend leaves as they are: it sleeps between
    polls and holds nothing to release or close; it has no batch validate process and queues no collect job."""

    batch_validate = False
    chains_collect = False
    detaches = False

    def stop(self, refs: list) -> None:
        for ref in refs:
            self.cancel(ref)

    def submit_collect(self, sweep_id: str, after: list[str], secrets=None, overrides=()):  # noqa: ANN001, ANN201 - never called (chains_collect)
        raise AssertionError("no collect job for a scripted backend")

    def cancel_jobs(self, job_ids: list[str]) -> None:
        pass

    def exclude_nodes(self, nodes: list[str]) -> None:
        raise AssertionError("a scripted backend runs no fabric probe")

    def wait(self, timeout_s: float) -> bool:
        import time

        time.sleep(max(0.0, timeout_s))
        return False

    def finish(self) -> None:
        pass

    def disconnect(self) -> None:
        pass

    def close(self) -> None:
        pass


def train_without_gpu(monkeypatch: Any) -> None:
    """Let a unit test plan ``mode=train`` on cluster=local on this GPU-less machine: its scripted backend runs
    no payload, so the planner's GPU check (:func:`experiments.checks.check_train_gpus`) is lifted for it."""
    import experiments.plan as plan_mod

    monkeypatch.setattr(plan_mod, "check_train_gpus", lambda *a: None)
