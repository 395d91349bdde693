"""The training payload: what runs inside the training container, one process per GPU.

Entry points: ``python -m experiments.train`` (one variant; exit codes in :mod:`experiments.train`) and
``python -m experiments.payload.validate_all`` (many variants, the ``preflight=container`` job).
Public API for other stages: :func:`experiments.payload.mcore_check.check_transformer_config` (Megatron-Core's
own checks on a CPU) and :func:`experiments.payload.validate_all.validate_all`.

Modules (imports of torch / Megatron happen lazily, inside functions):
- ``spec``: variant.json -> ``VariantSpec``;  ``errors``: exit codes and exceptions;
- ``mcore_check``: Megatron-Core ``TransformerConfig`` checks;  ``validate``: validate mode;
- ``bridge_api``: loading Megatron-Bridge, recipes, Hugging Face paths;  ``bridge_config``: applying a variant;
- ``effective`` / ``outcome``: the CONTRACTS §6 document;  ``runtime_info``: versions, GPU, ranks, environment;
- ``train_run``: train mode;  ``cli``: the command line;  ``validate_all``: the preflight job.
"""

__all__ = ["check_transformer_config", "CheckResult", "validate_all"]


def __getattr__(name: str):
    if name in ("check_transformer_config", "CheckResult"):
        from experiments.payload import mcore_check

        return getattr(mcore_check, name)
    if name == "validate_all":
        from experiments.payload.validate_all import validate_all

        return validate_all
    raise AttributeError(name)
