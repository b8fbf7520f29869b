"""python -m smax.bench runs, skips what is missing, and writes the JSON format of
the C++ `smax bench --json`."""

import json
import subprocess
import sys

import pytest

from smax import bench


def test_bench_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench.main(["--workload", "classify", "--repeats", "1", "--threads", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report) == {"tool", "machine", "results"}
    assert {"smax_version", "cpu_model", "threads", "libraries"} <= set(report["machine"])
    impls = {r["impl"] for r in report["results"]}
    assert "smax:auto" in impls
    for r in report["results"]:
        assert set(r) == {"workload", "shape", "axis", "dtype", "threads", "impl", "median_s", "gbps", "max_rel_err",
                          "ok"}
        assert r["workload"] == "classify" and r["shape"] == [256, 1000] and r["axis"] == -1 and r["dtype"] == "f32"
        assert r["median_s"] > 0 and r["gbps"] > 0
    smax_result = next(r for r in report["results"] if r["impl"] == "smax:auto")
    assert smax_result["max_rel_err"] <= 1e-6 and smax_result["threads"] == 1
    table = capsys.readouterr().out
    assert "smax:auto" in table and "GB/s" in table


def test_bench_every_dtype_and_algorithm(capsys):
    dtypes = "float32,float64,float16" + (",bfloat16" if _has_ml_dtypes() else "")
    assert bench.main(["--workload", "classify", "--impl", "smax", "--dtype", dtypes, "--algorithm", "auto,online",
                       "--repeats", "1", "--threads", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("classify ")]
    assert len(lines) == 2 * len(dtypes.split(","))


def test_bench_rejects_unknown_workload():
    result = subprocess.run([sys.executable, "-m", "smax.bench", "--workload", "nope"], capture_output=True, text=True)
    assert result.returncode == 2 and "unknown workload nope" in result.stderr


def _has_ml_dtypes():
    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        return False
    return True


def test_bench_training_workload(monkeypatch, capsys):
    # The real shapes move gigabytes; the table and its rows are the same on small ones.
    monkeypatch.setattr(bench, "TRAINING_SHAPES", [(3, 257)])
    assert bench.main(["--workload", "training", "--repeats", "1", "--threads", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.split()[:1] in (["softmax"], ["log_softmax"],
                                                                                          ["cross_entropy"])]
    assert len(lines) == 3
    assert all("3x257" in line for line in lines)
