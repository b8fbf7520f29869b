"""The non-finite, empty and rank-0 rules of docs/SEMANTICS.md, through Python."""

import numpy as np
import pytest

import smax
from reference import DTYPE_IDS, DTYPES

inf, nan = np.inf, np.nan


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_non_finite_rows(dtype):
    x = np.array(
        [
            [1.0, nan, 2.0],  # a NaN: all NaN
            [1.0, inf, 2.0],  # a +inf: softmax NaN (inf/inf, as PyTorch), logsumexp +inf
            [-inf, 0.0, -inf],  # some -inf: exactly 0 there
            [-inf, -inf, -inf],  # fully masked
        ],
        dtype=dtype,
    )
    p = smax.softmax(x).astype(np.float64)
    assert np.isnan(p[0]).all() and np.isnan(p[1]).all()
    np.testing.assert_array_equal(p[2], [0, 1, 0])
    assert np.isnan(p[3]).all()

    lp = smax.log_softmax(x).astype(np.float64)
    assert np.isnan(lp[0]).all() and np.isnan(lp[1]).all()
    np.testing.assert_array_equal(lp[2], [-inf, 0, -inf])
    assert np.isnan(lp[3]).all()

    lse = smax.logsumexp(x).astype(np.float64)
    assert np.isnan(lse[0])
    assert lse[1] == inf and lse[2] == 0 and lse[3] == -inf


def test_all_masked_zero():
    x = np.array([[-inf, -inf], [0.0, -inf]], dtype=np.float32)
    np.testing.assert_array_equal(smax.softmax(x, all_masked="zero"), [[0, 0], [1, 0]])
    np.testing.assert_array_equal(smax.log_softmax(x, all_masked="zero"), [[-inf, -inf], [0, -inf]])
    assert np.isnan(smax.softmax(x, all_masked="nan")[0]).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_empty_tensors(dtype):
    batch_empty = np.zeros((0, 5), dtype=dtype)
    for op in (smax.softmax, smax.log_softmax):
        assert op(batch_empty).shape == (0, 5)
        assert op(batch_empty, axis=0).shape == (0, 5)
    assert smax.logsumexp(batch_empty).shape == (0,)
    # The sum of nothing is 0: logsumexp over an empty axis is -inf for every row.
    lse = smax.logsumexp(batch_empty, axis=0)
    assert lse.shape == (5,) and lse.dtype == dtype
    assert (lse.astype(np.float64) == -inf).all()
    assert smax.logsumexp(batch_empty, axis=0, keepdims=True).shape == (1, 5)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_rank_zero(dtype):
    x = np.array(3.5, dtype=dtype)
    assert smax.softmax(x).shape == () and float(smax.softmax(x)) == 1
    assert float(smax.log_softmax(x)) == 0
    assert float(smax.logsumexp(x, temperature=0.5)) == 7.0
    assert float(smax.softmax(x, axis=0)) == 1  # axis 0 and -1 both name the scalar's row


def test_python_scalars_and_lists():
    np.testing.assert_allclose(smax.softmax([0.0, np.log(3.0)]), [0.25, 0.75])
    assert smax.softmax(2.0) == 1.0
    assert isinstance(smax.softmax([1.0]), np.ndarray)


def test_out_of_another_layout():
    x = np.random.default_rng(1).normal(size=(6, 7))
    out = np.empty((7, 6)).T  # Fortran-ordered output
    assert smax.log_softmax(x, out=out) is out
    np.testing.assert_array_equal(out, smax.log_softmax(x))


def test_logsumexp_out():
    x = np.random.default_rng(2).normal(size=(4, 9)).astype(np.float32)
    out = np.empty((4, 1), dtype=np.float32)
    assert smax.logsumexp(x, axis=1, keepdims=True, out=out) is out
    np.testing.assert_array_equal(out[:, 0], smax.logsumexp(x, axis=1))


@pytest.mark.parametrize("threads", [1, 2, 3, 0])
def test_thread_count_does_not_change_bits(threads):
    x = np.random.default_rng(3).normal(size=(64, 3000)).astype(np.float32)
    for op in (smax.softmax, smax.log_softmax, smax.logsumexp):
        np.testing.assert_array_equal(op(x, threads=threads), op(x, threads=1))
