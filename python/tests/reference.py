"""The reference the tests hold smax to: the same maths in long double (80-bit on
x86), and the accuracy bar of docs/SEMANTICS.md."""

from __future__ import annotations

import numpy as np

try:
    import ml_dtypes
except ImportError:  # the bfloat16 cases skip
    ml_dtypes = None

BFLOAT16 = np.dtype(ml_dtypes.bfloat16) if ml_dtypes is not None else None

# Every dtype smax takes, as NumPy holds it (bfloat16 only with ml_dtypes).
DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)] + ([BFLOAT16] if BFLOAT16 else [])
DTYPE_IDS = [str(d) for d in DTYPES]

# The smallest magnitude that rounds to infinity in each type: max finite + half an ulp.
_OVERFLOW = {
    "float32": np.ldexp(np.longdouble(2) - np.ldexp(np.longdouble(1), -24), 127),
    "float64": np.ldexp(np.longdouble(2) - np.ldexp(np.longdouble(1), -53), 1023),
    "float16": np.longdouble(65520),
    "bfloat16": np.ldexp(np.longdouble(2) - np.ldexp(np.longdouble(1), -8), 127),
}


def is_16_bit(dtype) -> bool:
    return np.dtype(dtype).itemsize == 2


def to_longdouble(a) -> np.ndarray:
    """Exact widening of any supported array (16-bit types go through float32)."""
    a = np.asarray(a)
    if is_16_bit(a.dtype):
        a = a.astype(np.float32)
    return a.astype(np.longdouble)


def reference(op: str, x, axis: int = -1, temperature: float = 1.0, keepdims: bool = False) -> np.ndarray:
    """softmax, log_softmax or logsumexp of x (already in its storage type) in long
    double, for rows of at least one element. Rank 0 is a row of one."""
    xl = to_longdouble(x)
    if xl.ndim == 0:
        return reference(op, xl.reshape(1), 0, temperature).reshape(())
    t = np.longdouble(temperature)
    m = xl.max(axis=axis, keepdims=True)
    z = (xl - m) / t
    # d = 1 + s, where s sums every term but one maximum's exp(0) = 1. log1p(s) keeps
    # log(d) exact when s is far below long double's epsilon (a dominated row, whose
    # log_softmax at the max is a tiny -s that 16-bit outputs still resolve).
    others = np.exp(z)
    first_max = np.expand_dims(np.argmax(xl, axis=axis), axis)
    np.put_along_axis(others, first_max, 0, axis=axis)
    s = others.sum(axis=axis, keepdims=True)
    if op == "softmax":
        return np.exp(z) / (1 + s)
    if op == "log_softmax":
        return z - np.log1p(s)
    lse = m / t + np.log1p(s)
    return lse if keepdims else np.squeeze(lse, axis=axis)


def ulp16(dtype, ref: np.ndarray) -> np.ndarray:
    fraction_bits, min_exponent = (10, -14) if np.dtype(dtype) == np.float16 else (7, -126)
    magnitude = np.abs(ref)
    exponent = np.full(ref.shape, min_exponent, dtype=np.int64)
    normal = magnitude >= np.ldexp(np.longdouble(1), min_exponent)
    exponent[normal] = np.floor(np.log2(magnitude[normal])).astype(np.int64)
    return np.ldexp(np.longdouble(1), exponent - fraction_bits)


def tolerance(op: str, dtype, ref: np.ndarray) -> np.ndarray:
    if is_16_bit(dtype):
        return ulp16(dtype, ref)
    bar = 1e-13 if np.dtype(dtype) == np.float64 else (1e-6 if op == "softmax" else 2e-6)
    magnitude = np.abs(ref)
    if op != "softmax":
        return bar * np.maximum(1, magnitude)
    return np.where(magnitude >= 1e-30, bar * magnitude, np.longdouble(1e-36))


def assert_meets_bar(op: str, got, ref: np.ndarray, what: str = "") -> None:
    """Every element of got is within the library's bar of ref (NaN where ref is
    NaN, the right infinity where ref overflows the output type)."""
    got = np.asarray(got)
    dtype = got.dtype
    g = to_longdouble(got)
    ref = np.asarray(ref, dtype=np.longdouble)
    assert g.shape == ref.shape, f"{what}: shape {g.shape} != reference {ref.shape}"
    nan = np.isnan(ref)
    bad = nan & ~np.isnan(g)
    overflow = ~nan & (np.isinf(ref) | (np.abs(ref) >= _OVERFLOW[dtype.name]))
    bad |= overflow & (g != np.copysign(np.longdouble(np.inf), ref))
    regular = ~nan & ~overflow
    with np.errstate(invalid="ignore"):
        error = np.abs(g - ref)
        bad |= regular & ~(error <= tolerance(op, dtype, ref))  # a NaN error fails too
    if bad.any():
        where = np.argwhere(bad)[:5]
        details = ", ".join(f"{tuple(i)}: got {g[tuple(i)]!r} ref {ref[tuple(i)]!r}" for i in where)
        raise AssertionError(f"{op} {what}: {bad.sum()} of {bad.size} outputs miss the bar: {details}")


def random_input(rng: np.random.Generator, shape, dtype, scale: float = 3.0) -> np.ndarray:
    """Normal(0, scale) values rounded to dtype, with a few large ones so that the
    max subtraction matters."""
    values = rng.normal(0.0, scale, size=shape)
    if values.size:
        flat = values.reshape(-1)
        picks = rng.integers(0, flat.size, size=max(1, flat.size // 50))
        flat[picks] += rng.choice([-40.0, 40.0], size=picks.size)
    return values.astype(np.float32).astype(dtype)
