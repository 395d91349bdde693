"""Reading a log (the analysis' bottom room): the iteration, memory and Step Time grammar (``grammar``), the chunked
scanner and its numpy/Arrow bulk path (``scanner``, ``bulk``, ``locate``), the failure markers (``markers``) and
their signature catalogue (``catalogue``, ``signatures``), the error-code table (``codes``), the parser
(``parse``) and its records (``records``: ``ParsedLog``, ``IterationSeries``, ``Marker``, the room's leaf).

Imports nothing else of the analysis. The rest of the analysis uses only the names below.
"""

from analysis import face

__getattr__, __all__ = face(__name__, {
    "parse": ("group_restart_files", "parse_files", "parse_iteration_line",
              "parse_lines", "restart_key"),
    "markers": ("EXCEPTION_RE", "PHASE_RE"),
    "records": ("IterationSeries", "Marker", "ParsedLog"),
    "catalogue": ("signal_name",),
    "codes": ("Cause", "decode"),
    "": ("catalogue",),
})
