"""How fast (above ``analysis.logs``, beside ``analysis.judge``): a run's step-time and throughput statistics
(``stats``), the comparisons of variants (``compare``, ``paired``, ``sequential``, ``pooled``), the bound (``bound``,
``bound_records``), where the held GPU time went (``fixed_cost``), the profiled step breakdown
(``profile_breakdown``), and the typed results the report writes (``results``).

The rest of the analysis, and the planner and conductor, use only the names below.
"""

from analysis import face

__getattr__, __all__ = face(__name__, {
    "results": ("Comparison", "LaterStep", "RunConfig", "RunResult", "Summary"),
    "stats": ("Estimate", "compute_stats"),
    "compare": ("backend_rates", "compare_all"),
    "paired": ("Design", "drift"),
    "sequential": ("K_MIN", "METHOD"),
    "pooled": ("GroupNoise", "NoisePrior", "prior_from_rows"),
    "bound": ("BoundError", "a2a_bytes_per_step", "bound_report", "ceiling_from_sweep", "link_bound",
              "read_matmul_ceiling"),
    "profile_breakdown": ("PARTS", "load_or_summarize"),
    "": ("fixed_cost",),
})
