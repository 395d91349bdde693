"""scripts/gpu/matmul_ceiling.py: FLOP arithmetic, the correctness gate, the JSON it writes (CPU, small sizes)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.megatron  # the script imports torch; the test extra installs it
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu" / "matmul_ceiling.py"


def _load():
    spec = importlib.util.spec_from_file_location("matmul_ceiling", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def mm():
    """The script as a module, loaded once (its torch import happens here, never at collection)."""
    return _load()


def test_flops_of_square_8192_product(mm):
    # 2 * 8192^3 = 1.0995e12: one product of that size at 1.0 ms is 1099.5 TFLOP/s
    assert mm.matmul_flops(8192, 8192, 8192) == 2 * 8192**3
    assert mm.tflops(mm.matmul_flops(8192, 8192, 8192), 1e-3) == pytest.approx(1099.5116, rel=1e-6)


def test_rectangular_flops_and_bad_sizes(mm):
    assert mm.matmul_flops(2, 3, 4) == 48
    with pytest.raises(ValueError, match="m=0"):
        mm.matmul_flops(0, 3, 4)
    with pytest.raises(ValueError, match="seconds"):
        mm.tflops(10, 0.0)


def test_measure_on_cpu_reports_consistent_figures(mm):
    r = mm.measure(128, "bf16", iters=4, warmup=1, device=mm.torch.device("cpu"))
    assert r["m"] == r["n"] == r["k"] == 128 and r["iters"] == 4
    assert 0 < r["min_ms"] <= r["median_ms"]
    assert r["tflops_best"] >= r["tflops_median"] > 0
    assert r["tflops_median"] == pytest.approx(mm.tflops(mm.matmul_flops(128, 128, 128), r["median_ms"] / 1e3))
    assert 0 < r["rel_err"] < mm.MAX_REL_ERR["bf16"]


def test_measure_rejects_unknown_dtype_naming_valid_ones(mm):
    with pytest.raises(ValueError, match="int8.*bf16"):
        mm.measure(64, "int8", iters=1, warmup=0, device=mm.torch.device("cpu"))


def test_wrong_product_is_caught(mm, monkeypatch):
    real = mm.torch.matmul

    def broken(a, b, out=None):
        res = real(a, b)
        res[0, 0] = float("inf")
        if out is not None:
            out.copy_(res)
            return out
        return res

    monkeypatch.setattr(mm.torch, "matmul", broken)
    with pytest.raises(RuntimeError, match="product is wrong"):
        mm.measure(64, "bf16", iters=1, warmup=0, device=mm.torch.device("cpu"))


def test_main_writes_json_and_prints_ceiling(mm, tmp_path, capsys):
    out = tmp_path / "sub" / "matmul.json"
    assert mm.main(["--device", "cpu", "--sizes", "64,128", "--iters", "3", "--warmup", "1", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["schema_version"] == 1 and data["device"] == "cpu" and data["dtype"] == "bf16"
    assert [r["m"] for r in data["results"]] == [64, 128]
    assert data["ceiling_tflops"] == max(r["tflops_median"] for r in data["results"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"MATMUL_CEILING_TFLOPS={data['ceiling_tflops']:.1f} (bf16,")
    assert not list(out.parent.glob(".matmul-*"))  # no temporary file left behind


def test_main_rejects_bad_sizes(mm):
    with pytest.raises(SystemExit):
        mm.main(["--device", "cpu", "--sizes", "8k"])
