"""Analysis stage: parse logs, classify failures, measure, compare variants, write the report (see README.md).

Entry points: ``python -m analysis.report`` and ``analysis.report.analyze_sweep`` / ``write_report``. Nothing is
imported here, so ``import analysis.history`` stays light.
"""
