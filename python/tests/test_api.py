"""The package's surface: version, info, plan, docstrings (their examples run), stubs."""

import doctest
import re
from pathlib import Path

import numpy as np

import smax

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_the_cmake_project_version():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert smax.__version__ == re.search(r"project\(\s*smax\s+VERSION\s+([0-9.]+)", cmake).group(1)
    assert smax.info()["version"] == smax.__version__


def test_info():
    info = smax.info()
    assert set(info) == {"version", "cpu_model", "architecture", "vendor", "features", "l1d_bytes", "l2_bytes",
                         "l3_bytes", "threads", "assumed"}
    assert info["vendor"] in ("intel", "amd", "")
    assert isinstance(info["features"], list) and isinstance(info["assumed"], list)
    assert all(info[k] > 0 for k in ("l1d_bytes", "l2_bytes", "l3_bytes", "threads"))
    assert isinstance(info["cpu_model"], str) and info["architecture"]


def test_plan():
    p = smax.plan((64, 128256), axis=-1, dtype="float32", op="softmax")
    assert p["rows"] == 64 and p["length"] == 128256 and p["dtype"] == "f32"
    assert p["algorithm"] in {"naive", "safe", "fused", "tiled", "online"} and p["reason"]
    assert smax.plan([10, 5], axis=0, dtype=np.float16, op="logsumexp")["length"] == 10
    assert smax.plan((64, 1000))["chunk_length"] == 0
    assert smax.plan((1, 1 << 20))["chunk_length"] > 0  # a long row is split into chunks
    assert smax.plan((4, 100), dtype="bf16", algorithm="online", threads=1)["algorithm"] == "online"
    assert smax.plan((4, 100), threads=1)["threads"] == 1
    assert smax.plan((64, 1000))["stores"] == "cached"
    assert smax.plan((64, 1000), stores="streaming")["stores"] == "streaming"
    assert smax.plan((64, 1000), dtype="bf16", stores="streaming")["stores"] == "streaming"
    assert smax.plan((64, 1000), dtype="float64", stores="streaming")["stores"] == "cached"  # f64 never streams


def test_streaming_stores_write_the_cached_bits():
    rng = np.random.default_rng()
    for shape in [(3, 1000), (2, 70001), (5, 17)]:
        x = rng.normal(0.0, 4.0, shape).astype(np.float32)
        cached = smax.softmax(x, stores="cached")
        for algorithm in ["auto", "safe", "fused", "tiled", "online"]:
            if algorithm == "fused" and shape[1] > 16384:
                continue
            streamed = smax.softmax(x, algorithm=algorithm, stores="streaming")
            np.testing.assert_allclose(streamed, cached, rtol=2e-6, atol=0)
        np.testing.assert_array_equal(smax.softmax(x, stores="streaming"), cached)
        np.testing.assert_array_equal(smax.log_softmax(x, stores="streaming"), smax.log_softmax(x, stores="cached"))


def test_large_new_outputs_start_at_a_cache_line():
    # NumPy's own large arrays start 16 bytes past a page; smax's new outputs of a
    # mebibyte or more start at 64 bytes, with the bits of any other output.
    x = np.random.default_rng().normal(0.0, 3.0, (64, 4096)).astype(np.float32)
    for op in (smax.softmax, smax.log_softmax):
        y = op(x, stores="streaming")
        assert y.ctypes.data % 64 == 0 and y.shape == x.shape and y.dtype == x.dtype and y.flags.c_contiguous
        out = np.empty(x.size + 1, np.float32)[1:].reshape(x.shape)  # 4 bytes past wherever NumPy put it
        np.testing.assert_array_equal(op(x, stores="streaming", out=out), y)
    small = smax.softmax(np.zeros((2, 3), np.float32))
    assert small.base is None  # small outputs: NumPy's own array


def test_plan_errors():
    import pytest

    with pytest.raises(TypeError, match="unsupported dtype int8"):
        smax.plan((4,), dtype="int8")
    with pytest.raises(np.exceptions.AxisError):
        smax.plan((4,), axis=1)
    with pytest.raises(ValueError, match="unknown op"):
        smax.plan((4,), op="softplus")


def test_docstring_examples_run():
    failures, tried = doctest.testmod(smax, extraglobs={"np": np, "smax": smax}, verbose=False)
    assert tried > 10 and failures == 0


def test_every_public_function_is_documented():
    for name in smax.__all__:
        if name != "__version__":
            assert getattr(smax, name).__doc__, name


def test_type_information_ships_with_the_package():
    package = Path(smax.__file__).parent
    assert (package / "py.typed").exists() and (package / "_smax.pyi").exists()
