"""Arrays are read and written where they are: out=x shares memory with x, DLPack
objects go both ways without a copy, and NumPy allocates nothing input-sized."""

import tracemalloc

import numpy as np
import pytest

import smax
from reference import BFLOAT16, DTYPE_IDS, DTYPES, reference


class Producer:
    """A minimal DLPack producer that is not a NumPy array (as a CuPy-on-CPU or any
    other framework's tensor would be), wrapping NumPy memory."""

    def __init__(self, array):
        self.array = array
        self.exports = 0

    def __dlpack__(self, **kwargs):
        self.exports += 1
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("op", [smax.softmax, smax.log_softmax], ids=lambda f: f.__name__)
def test_out_is_x_in_place(op, dtype):
    x = np.random.default_rng(0).normal(size=(5, 6)).astype(dtype)
    expected = op(x)
    result = op(x, out=x)
    assert result is x and np.shares_memory(result, x)
    np.testing.assert_array_equal(x, expected)


@pytest.mark.parametrize("view", ["reversed", "transposed", "strided"])
def test_in_place_on_views(view):
    base = np.random.default_rng(1).normal(size=(8, 10))
    x = {"reversed": base[::-1, ::-1], "transposed": base.T, "strided": base[::2, ::3]}[view]
    expected = smax.softmax(np.ascontiguousarray(x), axis=0)
    assert smax.softmax(x, axis=0, out=x) is x
    # x is a view of base, so base changed. The contiguous copy may run other kernels
    # (column panels where the view's axis is a row), so the two agree to the f64 bar,
    # not necessarily to the last bit.
    np.testing.assert_allclose(x, expected, rtol=1e-13, atol=0)


def test_dlpack_producer_in_place():
    base = np.random.default_rng(2).normal(size=(4, 7)).astype(np.float32)
    expected = smax.softmax(base)
    producer = Producer(base)
    smax.softmax(producer, out=producer)
    np.testing.assert_array_equal(base, expected)  # written through DLPack, where it lives
    assert producer.exports >= 2


def test_dlpack_producer_with_strides():
    base = np.random.default_rng(3).normal(size=(6, 9))
    view = base[::-2, ::3]
    got = smax.log_softmax(Producer(view), axis=0)
    assert isinstance(got, np.ndarray)  # the producer's module has no from_dlpack: NumPy
    np.testing.assert_array_equal(got, smax.log_softmax(np.ascontiguousarray(view), axis=0))


def test_numpy_dlpack_round_trip_shares_memory():
    x = np.arange(12.0).reshape(3, 4)
    y = np.from_dlpack(x)  # what a framework importing our output through DLPack gets
    smax.softmax(y, out=y)
    assert np.shares_memory(x, y)
    np.testing.assert_array_equal(x, smax.softmax(np.arange(12.0).reshape(3, 4)))


def test_no_input_sized_allocation():
    """NumPy's allocations are visible to tracemalloc: a copy of x (a conversion, a
    contiguous temporary) would show up as a peak of x's size."""
    x = np.random.default_rng(4).normal(size=(1024, 1024))[:, ::2]  # 4 MiB, non-contiguous
    b = np.broadcast_to(np.arange(1024.0), (4096, 1024))  # 32 MiB if materialised
    out = np.empty(x.shape)
    out_b = np.empty(b.shape[0])
    tracemalloc.start()
    try:
        smax.softmax(x, out=out)
        smax.softmax(x, out=x)
        smax.logsumexp(b, out=out_b)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, f"a call allocated {peak} bytes"
    np.testing.assert_allclose(out_b, reference("logsumexp", b[:1], -1)[0].astype(np.float64))


@pytest.mark.skipif(BFLOAT16 is None, reason="needs ml_dtypes")
def test_bfloat16_numpy_in_place():
    x = np.linspace(-3, 3, 12).astype(BFLOAT16).reshape(3, 4)
    expected = smax.softmax(x)
    assert expected.dtype == BFLOAT16
    assert smax.softmax(x, out=x) is x
    np.testing.assert_array_equal(x.astype(np.float32), expected.astype(np.float32))
