"""Reading a log (the analysis' bottom room): the iteration, memory and Step Time grammar (``grammar``), the chunked
scanner and its numpy/Arrow bulk path (``scanner``, ``bulk``, ``bulkregion``, ``locate``), the failure markers
(``markers``) and their signature catalogue (``catalogue``, ``signatures``), and the parsed record (``parse``).

Imports nothing else of the analysis. The rest of the analysis uses only the names below.
"""

from analysis import face

__getattr__, __all__ = face(__name__, {
    "parse": ("IterationSeries", "ParsedLog", "group_restart_files", "parse_files", "parse_iteration_line",
              "parse_lines", "restart_key"),
    "markers": ("EXCEPTION_RE", "Marker", "PHASE_RE"),
    "catalogue": ("signal_name",),
    "": ("catalogue",),
})
