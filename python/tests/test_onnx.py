"""Every Softmax, LogSoftmax and ReduceLogSumExp case of the ONNX backend node tests in
../shared/conformance/onnx/, against the stored output (at ONNX's float32 bar) and
against the long double reference (at the library's bar). SoftmaxCrossEntropyLoss
cases are not the library's yet and are left out."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

import smax
from reference import assert_meets_bar, reference

ONNX_DIR = Path(os.environ.get("SMAX_ONNX_DIR", Path(__file__).resolve().parents[3] / "shared/conformance/onnx"))
OPS = {"Softmax": "softmax", "LogSoftmax": "log_softmax", "ReduceLogSumExp": "logsumexp"}


def load_cases():
    manifest = ONNX_DIR / "manifest.json"
    if not manifest.exists():
        return []
    return [c for c in json.loads(manifest.read_text())["cases"] if c["op"] in OPS]


CASES = load_cases()


def test_the_conformance_data_is_there():
    if not CASES:
        pytest.skip(f"no ONNX conformance data at {ONNX_DIR} (set SMAX_ONNX_DIR)")
    assert {c["op"] for c in CASES} == set(OPS)


def run_case(case, x):
    """(what smax computes, the long double reference), both in x's final layout."""
    op = OPS[case["op"]]
    attributes = case.get("attributes", {})
    if op != "logsumexp":
        axis = attributes.get("axis", -1 if case["opset"] >= 13 else 1)
        if case["opset"] < 13:
            # Before opset 13 the input is coerced to 2-D at `axis` and normalised over
            # the flattened trailing dimensions.
            axis %= max(x.ndim, 1)
            x = x.reshape(int(np.prod(x.shape[:axis])), -1)
            axis = 1
        return getattr(smax, op)(x, axis), reference(op, x, axis)

    axes = [int(a) for a in np.load(ONNX_DIR / case["case"] / case["inputs"][1]["file"])] \
        if len(case["inputs"]) > 1 else list(attributes.get("axes", []))
    if not axes and not attributes.get("noop_with_empty_axes", 0):
        axes = list(range(x.ndim))
    axes = sorted(a % x.ndim for a in axes)
    # smax reduces one axis; several compose exactly (each step is the log of a
    # partial sum), one axis at a time with keepdims so the axis numbers stay put.
    got = x
    for axis in axes:
        got = smax.logsumexp(got, axis, keepdims=True)
    # The reference reduces all axes at once: move them to the end and flatten them.
    kept = [a for a in range(x.ndim) if a not in axes]
    rows = np.transpose(x, kept + axes).reshape([x.shape[a] for a in kept] + [-1])
    if rows.shape[-1] == 0:
        ref = np.full(rows.shape[:-1], -np.inf, dtype=np.longdouble)
    else:
        ref = reference("logsumexp", rows, -1)
    ref = ref.reshape([1 if a in axes else x.shape[a] for a in range(x.ndim)])
    if not attributes.get("keepdims", 1):
        got, ref = np.squeeze(got, tuple(axes)), np.squeeze(ref, tuple(axes))
    return got, ref


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_onnx_case(case):
    folder = ONNX_DIR / case["case"]
    x = np.load(folder / case["inputs"][0]["file"])
    expected = np.load(folder / case["outputs"][0]["file"])
    got, ref = run_case(case, x)
    got = got.reshape(expected.shape)  # opset < 13 computed on a 2-D view
    ref = ref.reshape(expected.shape)
    assert got.dtype == expected.dtype

    # The stored outputs are within 1-2 float32 ulp of a float64 recomputation.
    g, e = got.astype(np.float64), expected.astype(np.float64)
    finite = np.isfinite(e)
    np.testing.assert_array_equal(g[~finite], e[~finite])
    ulp = np.spacing(np.abs(e[finite]).astype(np.float32)).astype(np.float64)
    bar = 4 * ulp + 1e-7 * np.maximum(1, np.abs(e[finite]))
    assert (np.abs(g[finite] - e[finite]) <= bar).all(), f"{case['case']}: {g} vs ONNX {e}"

    assert_meets_bar(OPS[case["op"]], got, ref, case["case"])
