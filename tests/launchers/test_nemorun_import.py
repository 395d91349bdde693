"""launchers.nemorun_import: NeMo-Run imported for real, without torch and the Lepton SDK, which stay importable
afterwards; a NeMo-Run that needs leptonai at import time gets it (the fallback). Fresh interpreters."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _py(code: str, extra_path: Path | None = None) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in (extra_path, REPO) if p])
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout.strip()


def test_the_real_executors_without_torch_and_leptonai_which_import_normally_later():
    out = _py(
        "import sys\n"
        "from launchers.nemorun_import import import_nemo_run, LeptonUnavailable\n"
        "run = import_nemo_run()\n"
        "print('torch' in sys.modules, 'leptonai' in sys.modules, 'fastapi' in sys.modules)\n"
        "print(run.LocalExecutor.__module__, run.SlurmExecutor.__module__)\n"
        "import nemo_run.core.execution.lepton as lep\n"
        "print(lep.APIClient is LeptonUnavailable)\n"
        "import leptonai\n"
        "print(leptonai.__name__, bool(getattr(leptonai, '__file__', None)))\n"
    )
    lines = out.splitlines()
    assert lines[0] == "False False False"
    assert lines[1] == "nemo_run.core.execution.local nemo_run.core.execution.slurm"
    assert lines[2] == "True"  # the Lepton executor's client is the stand-in ...
    assert lines[3] == "leptonai True"  # ... and a later import gets the real package from disk


def test_a_nemo_run_that_uses_leptonai_at_import_time_is_imported_plainly(tmp_path):
    fake = tmp_path / "nemo_run"
    fake.mkdir()
    (fake / "__init__.py").write_text("import leptonai\nVERSION = leptonai.__version__  # a dunder: not stood in\n")
    out = _py("from launchers.nemorun_import import import_nemo_run\n"
              "run = import_nemo_run()\n"
              "import leptonai\n"
              "print(run.VERSION == leptonai.__version__, bool(leptonai.__file__))\n", extra_path=tmp_path)
    assert out == "True True"


def test_lepton_stand_in_cannot_be_built():
    out = _py("from launchers.nemorun_import import LeptonUnavailable\n"
              "try:\n    LeptonUnavailable()\nexcept RuntimeError as e:\n    print('Lepton executor' in str(e))\n")
    assert out == "True"


def test_networkx_loads_on_first_use_and_then_works():
    out = _py(
        "import sys, importlib.util\n"
        "from launchers.nemorun_import import import_nemo_run, LAZY\n"
        "run = import_nemo_run()\n"
        "print(' '.join(type(sys.modules[n]).__name__ for n in LAZY))\n"
        "e = sys.modules['nemo_run.run.experiment']\n"
        "g = e.nx.DiGraph(); g.add_edge('a', 'b')\n"
        "print(list(e.nx.topological_sort(g)), type(sys.modules['networkx']).__name__)\n"
    )
    lines = out.splitlines()
    assert lines[0] == "_LazyModule"  # none of its code ran during the import
    assert lines[1] == "['a', 'b'] module"  # the real package, loaded where NeMo-Run first uses it
