"""What happened to a run (above ``analysis.logs``): the evidence of a parsed log (``findings``, with ``phase``,
``structure`` and ``health``), the order of events and their causes (``timeline``), the launch context
(``launch_context``), the scheduler's and torchrun's summaries (``summaries``), the run's label and expectation
(``labels``, ``expectation``), and the verdict (``classify``: one status and primary reason per run).

The rest of the analysis uses only the names below.
"""

from analysis import face

__getattr__, __all__ = face(__name__, {
    "classify": ("SchedulerInfo", "classify", "vocabulary"),
    "expectation": ("Expectation",),
    "labels": ("label_from_name",),
})

# bound now: importing the submodule ``classify`` sets this package's attribute of that name to the module, which
# would hide the function from ``__getattr__``
from analysis.judge.classify import classify as classify  # noqa: E402
