"""smax.softmax_backward, smax.log_softmax_backward and smax.cross_entropy: against a
float64 NumPy reference, against torch autograd where torch is importable, in place,
and their errors. (The C++ tests hold the kernels to the long double bars.)"""

import numpy as np
import pytest

import smax
from reference import BFLOAT16


def softmax64(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def cross_entropy64(x, t, weight=None, ignore_index=-100, reduction="mean", smoothing=0.0):
    """PyTorch's definition in float64, class axis 1, class-index targets."""
    c = x.shape[1]
    logp = np.log(softmax64(x, 1))
    logp = np.moveaxis(logp, 1, -1)  # (..., C)
    w = np.ones(c) if weight is None else weight.astype(np.float64)
    keep = t != ignore_index
    safe_t = np.where(keep, t, 0)
    nll = -np.take_along_axis(logp, safe_t[..., None], -1)[..., 0] * w[safe_t]
    smooth = -(logp * w).sum(-1)
    per = np.where(keep, (1 - smoothing) * nll + smoothing / c * smooth, 0.0)
    if reduction == "none":
        return per
    if reduction == "sum":
        return per.sum()
    return per.sum() / np.where(keep, w[safe_t], 0).sum()


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_backward_matches_float64(rng, axis, dtype):
    x = rng.normal(size=(4, 6, 5))
    y = softmax64(x, axis).astype(dtype)
    dy = rng.normal(size=x.shape).astype(dtype)
    yy, dd = y.astype(np.float64), dy.astype(np.float64)
    expected = yy * (dd - (yy * dd).sum(axis=axis, keepdims=True)) / 0.5
    got = smax.softmax_backward(y, dy, axis=axis, temperature=0.5)
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-7)
    # log-softmax: dx = dy - p * sum(dy)
    log_y = np.log(softmax64(x, axis)).astype(dtype)
    expected = dd - np.exp(log_y.astype(np.float64)) * dd.sum(axis=axis, keepdims=True)
    got = smax.log_softmax_backward(log_y, dy, axis=axis)
    np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_backward_in_place_and_views(rng):
    x = rng.normal(size=(8, 9))
    y = softmax64(x, 1)
    dy = rng.normal(size=(8, 9))
    expected = smax.softmax_backward(y, dy)
    # Non-contiguous views read in place; out= over dy itself.
    yt, dyt = np.ascontiguousarray(y.T).T, np.ascontiguousarray(dy.T).T
    np.testing.assert_array_equal(smax.softmax_backward(yt, dyt), expected)
    buffer = dy.copy()
    result = smax.softmax_backward(y, buffer, out=buffer)
    assert result is buffer
    np.testing.assert_array_equal(buffer, expected)


@pytest.mark.parametrize("dtype_name", ["float32", "float16", "bfloat16"])
def test_backward_streaming_stores_write_the_cached_bits(rng, dtype_name):
    dtype = BFLOAT16 if dtype_name == "bfloat16" else np.dtype(dtype_name)
    if dtype is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    x = rng.normal(size=(6, 1000))
    dy = rng.normal(size=x.shape).astype(dtype)
    for op, forward in ((smax.softmax_backward, softmax64(x, 1)), (smax.log_softmax_backward, np.log(softmax64(x, 1)))):
        first = forward.astype(dtype)
        cached = op(first, dy, temperature=0.7, stores="cached")
        streamed = op(first, dy, temperature=0.7, stores="streaming")
        np.testing.assert_array_equal(streamed.view(np.uint8), cached.view(np.uint8))
    with pytest.raises(ValueError, match="softmax_backward: unknown stores 'around'"):
        smax.softmax_backward(first, dy, stores="around")


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_cross_entropy_matches_float64(rng, reduction):
    x = rng.normal(size=(5, 7, 3)).astype(np.float64)
    t = rng.integers(0, 7, size=(5, 3))
    t[0, 1] = -100
    w = rng.uniform(0.5, 2, size=7)
    loss, grad, log_prob = smax.cross_entropy(x, t, weight=w, reduction=reduction, label_smoothing=0.1, grad=True,
                                              log_prob=True)
    np.testing.assert_allclose(loss, cross_entropy64(x, t, w, -100, reduction, 0.1), rtol=1e-12)
    np.testing.assert_allclose(log_prob, np.log(softmax64(x, 1)), rtol=1e-12, atol=1e-13)
    # The gradient by central differences of the float64 reference (summed under none).
    h = 1e-6
    objective = lambda z: np.sum(cross_entropy64(z, t, w, -100, reduction, 0.1))  # noqa: E731
    for index in [(0, 0, 0), (1, 3, 2), (0, 2, 1), (4, 6, 0)]:
        plus, minus = x.copy(), x.copy()
        plus[index] += h
        minus[index] -= h
        assert abs(grad[index] - (objective(plus) - objective(minus)) / (2 * h)) < 1e-7


def test_cross_entropy_in_place_int32_last_axis_and_errors(rng):
    x = rng.normal(size=(6, 10)).astype(np.float32)
    t = rng.integers(0, 10, size=6).astype(np.int32)
    loss, grad = smax.cross_entropy(x, t, axis=-1, grad=True)
    buffer = x.copy()
    loss2, same = smax.cross_entropy(buffer, t, axis=-1, grad=buffer)
    assert same is buffer
    np.testing.assert_array_equal(buffer, grad)
    assert loss2 == loss and loss.shape == ()
    bad = t.copy()
    bad[3] = 10
    with pytest.raises(ValueError, match=r"target \[3\] is 10"):
        smax.cross_entropy(x, bad, axis=-1)
    with pytest.raises(ValueError, match="label_smoothing"):
        smax.cross_entropy(x, t, axis=-1, label_smoothing=2.0)
    with pytest.raises(ValueError, match="reduction"):
        smax.cross_entropy(x, t, axis=-1, reduction="avg")
    with pytest.raises(TypeError):
        smax.cross_entropy(x, t.astype(np.int16), axis=-1)
    # All ignored: mean NaN, sum 0, as PyTorch.
    ignored = np.full(6, -100)
    assert np.isnan(smax.cross_entropy(x, ignored, axis=-1))
    assert smax.cross_entropy(x, ignored, axis=-1, reduction="sum") == 0


@pytest.mark.parametrize("dtype_name", ["float32", "float16", "bfloat16"])
def test_cross_entropy_streaming_stores_write_the_cached_bits(rng, dtype_name):
    dtype = BFLOAT16 if dtype_name == "bfloat16" else np.dtype(dtype_name)
    if dtype is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    x = rng.normal(scale=3, size=(6, 1000)).astype(dtype)
    t = rng.integers(0, 1000, size=6)
    cached = smax.cross_entropy(x, t, axis=-1, grad=True, stores="cached")
    streamed = smax.cross_entropy(x, t, axis=-1, grad=True, stores="streaming")
    for a, b in zip(streamed, cached):
        bits = lambda v: np.asarray(v).reshape(-1).view(np.uint8)  # noqa: E731
        np.testing.assert_array_equal(bits(a), bits(b))
    with pytest.raises(ValueError, match="cross_entropy: unknown stores 'around'"):
        smax.cross_entropy(x, t, axis=-1, stores="around")


@pytest.fixture
def torch_module():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dtype_name", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("targets", ["index", "probabilities"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_cross_entropy_matches_torch_autograd(torch_module, rng, dtype_name, targets, reduction):
    torch = torch_module
    dtype = getattr(torch, dtype_name)
    x = torch.tensor(rng.normal(size=(4, 6, 3)), dtype=dtype)
    w = torch.tensor(rng.uniform(0.5, 2, size=6), dtype=dtype)
    if targets == "index":
        t = torch.tensor(rng.integers(0, 6, size=(4, 3)))
        t[1, 1] = 3
        kwargs = dict(ignore_index=3)
    else:
        t = torch.tensor(rng.uniform(0, 1, size=(4, 6, 3)), dtype=dtype)
        kwargs = {}
    x64 = x.to(torch.float64).clone().requires_grad_()
    t64 = t if targets == "index" else t.to(torch.float64)
    expected = torch.nn.functional.cross_entropy(x64, t64, weight=w.to(torch.float64), reduction=reduction,
                                                 label_smoothing=0.1, **kwargs)
    expected.sum().backward()
    loss, grad = smax.cross_entropy(x, t, weight=w, reduction=reduction, label_smoothing=0.1, grad=True, **kwargs)
    assert isinstance(loss, torch.Tensor) and isinstance(grad, torch.Tensor)
    assert loss.dtype == dtype and grad.dtype == dtype and tuple(loss.shape) == tuple(expected.shape)
    tol = {"float32": 1e-5, "float64": 1e-12, "bfloat16": 1e-2}[dtype_name]
    np.testing.assert_allclose(loss.to(torch.float64).numpy(), expected.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(grad.to(torch.float64).numpy(), x64.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("log", [False, True])
def test_backward_matches_torch_autograd(torch_module, rng, log):
    torch = torch_module
    x = torch.tensor(rng.normal(size=(3, 5, 7)), requires_grad=True)
    y = torch.log_softmax(x / 0.7, dim=1) if log else torch.softmax(x / 0.7, dim=1)
    dy = torch.tensor(rng.normal(size=(3, 5, 7)))
    y.backward(dy)
    f = smax.log_softmax_backward if log else smax.softmax_backward
    got = f(y.detach(), dy, axis=1, temperature=0.7)
    np.testing.assert_allclose(got.numpy(), x.grad.numpy(), rtol=1e-12, atol=1e-14)
