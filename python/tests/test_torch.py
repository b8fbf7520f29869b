"""Parity with torch.softmax, torch.log_softmax and torch.logsumexp, and torch tensors
in and out without copies. Skipped where torch is not installed."""

import numpy as np
import pytest

import smax
from reference import assert_meets_bar, reference

torch = pytest.importorskip("torch")

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
IDS = [str(d).replace("torch.", "") for d in DTYPES]
inf, nan = float("inf"), float("nan")


def as_numpy(t):
    """Exact values as float64 (16-bit types widen exactly), for comparisons."""
    return t.to(torch.float64).numpy()


def torch_op(op, x, axis):
    if op == "softmax":
        return torch.softmax(x, axis)
    if op == "log_softmax":
        return torch.log_softmax(x, axis)
    return torch.logsumexp(x, axis)


def assert_same_semantics(got, expected, dtype):
    """Same NaN and infinity pattern; finite values within a few output ulps (torch's
    own kernels are less exact than smax's, so this is a loose comparison)."""
    g, e = as_numpy(got), as_numpy(expected)
    assert g.shape == e.shape
    np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
    np.testing.assert_array_equal(np.isposinf(g), np.isposinf(e))
    np.testing.assert_array_equal(np.isneginf(g), np.isneginf(e))
    finite = np.isfinite(e)
    eps = {torch.float32: 1e-6, torch.float64: 1e-13, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    np.testing.assert_allclose(g[finite], e[finite], rtol=4 * eps, atol=4 * eps)


SPECIAL_ROWS = [
    [1.0, 2.0, 3.0],
    [1.0, nan, 2.0],
    [1.0, inf, 2.0],
    [-inf, 0.0, -inf],
    [-inf, -inf, -inf],
    [1e4, -1e4, 0.0],
]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp"])
def test_special_values_match_torch(op, dtype):
    x = torch.tensor(SPECIAL_ROWS, dtype=dtype)
    for axis in (-1, 0):
        got = getattr(smax, op)(x, axis)
        assert isinstance(got, torch.Tensor) and got.dtype == dtype
        assert_same_semantics(got, torch_op(op, x, axis), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp"])
def test_random_matches_torch_and_reference(op, dtype):
    gen = torch.Generator().manual_seed(11)
    x = (torch.randn(16, 33, 70, generator=gen) * 4).to(dtype)
    for axis in (0, 1, -1):
        got = getattr(smax, op)(x, axis)
        assert_same_semantics(got, torch_op(op, x, axis), dtype)
        xn = as_numpy(x).astype(np.float32 if dtype in (torch.float16, torch.bfloat16) else np.float64)
        ref = reference(op, xn, axis)
        if dtype == torch.float32:
            assert_meets_bar(op, got.numpy(), ref)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp"])
def test_empty_and_rank_zero_match_torch(op):
    for shape, axis in [((0, 4), -1), ((0, 4), 0), ((3, 0), -1), ((3, 0), 0)]:
        x = torch.zeros(shape)
        got, expected = getattr(smax, op)(x, axis), torch_op(op, x, axis)
        assert got.shape == expected.shape
        assert torch.equal(got, expected)
    scalar = torch.tensor(2.5)
    assert torch.equal(getattr(smax, op)(scalar, 0), torch_op(op, scalar, 0))


def test_logsumexp_keepdims_matches_torch():
    x = torch.randn(3, 4, 5, dtype=torch.float64)
    got = smax.logsumexp(x, 1, keepdims=True)
    expected = torch.logsumexp(x, 1, keepdim=True)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=1e-13, atol=1e-13)


def test_views_without_copies():
    # A view is read in place; its contiguous copy may take other kernels (rows for a
    # unit-stride axis, column panels otherwise), which may differ in the last bit
    # (docs/SEMANTICS.md): both must meet the bar.
    base = torch.randn(32, 48)
    for view in (base.t(), base[::2, 1::3], base[:1].expand(32, 48), base.unsqueeze(1).expand(32, 5, 48)):
        expected = reference("softmax", view.numpy(), 0)
        assert_meets_bar("softmax", smax.softmax(view, 0).numpy(), expected, "view")
        assert_meets_bar("softmax", smax.softmax(view.contiguous(), 0).numpy(), expected, "contiguous copy")
        torch.testing.assert_close(smax.softmax(view, 0), torch.softmax(view, 0))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_out_is_x_shares_storage(dtype):
    x = torch.randn(8, 100).to(dtype)
    expected = smax.log_softmax(x)
    pointer = x.data_ptr()
    result = smax.log_softmax(x, out=x)
    assert result is x and x.data_ptr() == pointer
    assert torch.equal(x, expected)


def test_numpy_and_torch_share_memory_through_dlpack():
    """A DLPack round trip does not copy: smax writes a NumPy array that torch sees."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = torch.from_dlpack(a)
    smax.softmax(t, out=t)
    assert t.data_ptr() == a.ctypes.data
    np.testing.assert_array_equal(a, smax.softmax(np.arange(12, dtype=np.float32).reshape(3, 4)))


def test_torch_errors():
    with pytest.raises(TypeError, match="unsupported input dtype int64"):
        smax.softmax(torch.arange(3))
    with pytest.raises(TypeError, match="output dtype f64 does not match input dtype f32"):
        smax.softmax(torch.zeros(3), out=torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ValueError, match="requires grad"):
        smax.softmax(torch.zeros(3, requires_grad=True))
    with pytest.raises(np.exceptions.AxisError, match="axis 3 is out of range"):
        smax.softmax(torch.zeros(2, 2), 3)
