"""Error types and messages: TypeError for dtypes, AxisError (a ValueError) for axes,
ValueError for the rest, each with the library's message; nothing written on error."""

import numpy as np
import pytest

import smax
from reference import BFLOAT16

OPS = [smax.softmax, smax.log_softmax, smax.logsumexp]
x32 = np.ones((3, 4), dtype=np.float32)


@pytest.mark.parametrize("op", OPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["int64", "int8", "uint16", "bool", "complex64", "complex128", "object"])
def test_unsupported_dtype_is_a_type_error_naming_it(op, dtype):
    x = np.zeros((2, 3), dtype=dtype)
    with pytest.raises(TypeError, match=rf"{op.__name__}: unsupported input dtype {dtype}\b"):
        op(x)


def test_unsupported_dtype_through_dlpack():
    class Producer:  # a DLPack object that is not a NumPy array
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    with pytest.raises(TypeError, match="unsupported input dtype int32"):
        smax.softmax(Producer(np.zeros(3, dtype=np.int32)))


def test_mismatched_output_dtype_carries_the_library_message():
    with pytest.raises(TypeError, match="output dtype f64 does not match input dtype f32"):
        smax.softmax(x32, out=np.empty((3, 4), dtype=np.float64))
    with pytest.raises(TypeError, match="unsupported output dtype int32"):
        smax.softmax(x32, out=np.empty((3, 4), dtype=np.int32))


@pytest.mark.skipif(BFLOAT16 is None, reason="needs ml_dtypes")
def test_bfloat16_output_for_a_float16_input():
    with pytest.raises(TypeError, match="output dtype bf16 does not match input dtype f16"):
        smax.softmax(np.ones(3, np.float16), out=np.empty(3, BFLOAT16))


@pytest.mark.parametrize("op", OPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("axis", [2, -3, 100, 2**40])
def test_bad_axis(op, axis):
    with pytest.raises(np.exceptions.AxisError, match=rf"axis {axis} is out of range") as caught:
        op(x32, axis)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, IndexError)


def test_axis_must_be_an_integer():
    with pytest.raises(TypeError):
        smax.softmax(x32, axis=1.0)
    with pytest.raises(TypeError):
        smax.softmax(x32, axis=(0, 1))


@pytest.mark.parametrize("temperature", [0.0, -1.0, np.inf, np.nan, 1e-39, 1e38, 1e46])
def test_bad_temperature(temperature):
    with pytest.raises(ValueError, match="temperature"):
        smax.softmax(x32, temperature=temperature)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"algorithm": "fastest"}, "unknown algorithm 'fastest'"),
        ({"pass_order": "sideways"}, "unknown pass_order 'sideways'"),
        ({"all_masked": "one"}, "unknown all_masked 'one'"),
        ({"stores": "around"}, "unknown stores 'around'"),
        ({"threads": -1}, "threads must be >= 0"),
    ],
)
def test_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        smax.softmax(x32, **kwargs)


def test_fused_row_too_long():
    with pytest.raises(ValueError, match="fused holds rows of at most 16384"):
        smax.softmax(np.zeros(16385, np.float32), algorithm="fused")


def test_rank_above_eight():
    with pytest.raises(ValueError, match="rank"):
        smax.softmax(np.zeros((1,) * 9, np.float32))


def test_wrong_output_shape_leaves_it_untouched():
    out = np.full((3, 5), 7.0, dtype=np.float32)
    with pytest.raises(ValueError, match=r"output shape \[3, 5\] does not match the expected \[3, 4\]"):
        smax.softmax(x32, out=out)
    assert (out == 7).all()
    lse_out = np.full((3, 4), 7.0, dtype=np.float32)
    with pytest.raises(ValueError, match="output shape"):
        smax.logsumexp(x32, out=lse_out)
    assert (lse_out == 7).all()


def test_partial_overlap_is_an_error():
    buffer = np.arange(20, dtype=np.float64)
    with pytest.raises(ValueError, match="overlap"):
        smax.softmax(buffer[0:10], out=buffer[5:15])
    np.testing.assert_array_equal(buffer, np.arange(20))


def test_self_overlapping_output_is_an_error():
    base = np.zeros(4, dtype=np.float32)
    out = np.lib.stride_tricks.as_strided(base, shape=(3, 4), strides=(0, 4), writeable=True)
    with pytest.raises(ValueError, match="strides"):
        smax.softmax(x32, out=out)


def test_logsumexp_output_must_not_overlap_input():
    x = np.zeros((4, 4))
    with pytest.raises(ValueError, match="overlap"):
        smax.logsumexp(x, out=x[0])


def test_read_only_output():
    with pytest.raises(ValueError, match="read-only"):
        smax.softmax(x32, out=np.broadcast_to(np.float32(0), (3, 4)))


def test_out_of_the_wrong_kind():
    with pytest.raises(TypeError, match="out must be"):
        smax.softmax(x32, out=[[0.0] * 4] * 3)


def test_set_num_threads_rejects_negative():
    with pytest.raises(ValueError, match="threads must be >= 0"):
        smax.set_num_threads(-2)
