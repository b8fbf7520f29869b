"""smax against a long double reference on random inputs of many shapes, axes,
dtypes, views and algorithms, at the bar of docs/SEMANTICS.md."""

import numpy as np
import pytest

import smax
from reference import DTYPE_IDS, DTYPES, assert_meets_bar, random_input, reference

OPS = ["softmax", "log_softmax", "logsumexp"]


def call(op, x, axis, **kwargs):
    return getattr(smax, op)(x, axis, **kwargs)


SHAPES = [
    ((), -1),
    ((1,), 0),
    ((7,), -1),
    ((3, 1000), -1),
    ((3, 1000), 0),
    ((2, 3, 5, 4), 1),
    ((2, 3, 5, 4), -2),
    ((4, 20000), -1),  # longer than the fused buffer: the planner picks something else
    ((1, 5, 1, 3), 2),  # an axis of one
]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape,axis", SHAPES, ids=[f"{s}-axis{a}" for s, a in SHAPES])
@pytest.mark.parametrize("op", OPS)
def test_random_contiguous(rng, op, shape, axis, dtype):
    x = random_input(rng, shape, dtype)
    got = call(op, x, axis)
    assert got.dtype == x.dtype
    assert_meets_bar(op, got, reference(op, x, axis), f"{dtype}{shape} axis {axis}")


# Views that are not C-contiguous: each takes a fresh random base array.
VIEWS = {
    "transposed": lambda b: b.T,
    "reversed": lambda b: b[::-1, ::-1],  # negative strides
    "every-other": lambda b: b[::2, 1::3],
    "fortran": lambda b: np.asfortranarray(b),
    "broadcast-rows": lambda b: np.broadcast_to(b[:1], b.shape),  # stride 0 across rows
    "broadcast-cols": lambda b: np.broadcast_to(b[:, :1], b.shape),  # stride 0 along rows
    "3d-middle": lambda b: b.reshape(6, 10, -1).transpose(2, 0, 1)[::-1],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("op", OPS)
def test_random_views(rng, op, axis, view, dtype):
    x = VIEWS[view](random_input(rng, (60, 90), dtype))
    got = call(op, x, axis)
    assert_meets_bar(op, got, reference(op, x, axis), f"{view} axis {axis}")
    # Its contiguous copy may take other kernels (rows for a unit-stride axis, column
    # panels for a strided one), so it meets the bar too rather than matching bits.
    copy = np.ascontiguousarray(x)
    assert_meets_bar(op, call(op, copy, axis), reference(op, copy, axis), f"contiguous copy of {view}, axis {axis}")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("algorithm", ["auto", "safe", "fused", "tiled", "online"])
@pytest.mark.parametrize("op", OPS)
def test_every_algorithm(rng, op, algorithm, dtype):
    for shape, axis in [((5, 3000), -1), ((300, 4), 0), ((1, 1), -1)]:
        x = random_input(rng, shape, dtype)
        for pass_order in ["reverse", "forward"]:
            got = call(op, x, axis, algorithm=algorithm, pass_order=pass_order)
            assert_meets_bar(op, got, reference(op, x, axis), f"{algorithm} {pass_order} {shape}")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("temperature", [0.05, 0.7, 3.0])
@pytest.mark.parametrize("op", OPS)
def test_temperature(rng, op, temperature, dtype):
    x = random_input(rng, (8, 257), dtype)
    got = call(op, x, -1, temperature=temperature)
    assert_meets_bar(op, got, reference(op, x, -1, temperature), f"T={temperature}")


@pytest.mark.parametrize("algorithm", ["safe", "tiled", "online"])
@pytest.mark.parametrize("op", OPS)
def test_long_row(rng, op, algorithm):
    """A row well past L2 and float32's 24 bits of sum: the compensated sum keeps it exact."""
    x = random_input(rng, (1 << 21,), np.float32, scale=1.0)
    got = call(op, x, -1, algorithm=algorithm)
    assert_meets_bar(op, got, reference(op, x, -1), f"{algorithm} 2^21")


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_logsumexp_shapes(rng, axis, keepdims):
    x = random_input(rng, (3, 4, 5), np.float64)
    got = smax.logsumexp(x, axis, keepdims)
    assert got.shape == np.sum(x, axis=axis, keepdims=keepdims).shape
    assert_meets_bar("logsumexp", got, reference("logsumexp", x, axis, keepdims=keepdims))


def test_naive_is_the_textbook_formula():
    """naive does no max subtraction: it overflows on purpose (README)."""
    got = smax.softmax(np.array([1.0, 100.0, 100000.0], dtype=np.float32), algorithm="naive")
    assert got[0] == 0 and np.isnan(got[1:]).all()
    small = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    assert_meets_bar("softmax", smax.softmax(small, algorithm="naive"), reference("softmax", small))
