"""smax: exact, fast softmax, log-softmax and logsumexp on the CPU.

The functions take NumPy arrays and any CPU tensor that speaks DLPack (PyTorch,
JAX, ...) without copying them: any strides work, including non-contiguous,
reversed (negative stride) and broadcast (stride 0) views. They return the same
kind of object that came in, or write into ``out=`` (which may be the input
itself). Supported dtypes: float32, float64, float16 and bfloat16 (``torch.bfloat16``,
or ``ml_dtypes.bfloat16`` for NumPy). The GIL is released while a kernel runs.

>>> import numpy as np, smax
>>> x = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
>>> print(smax.softmax(x).round(4))
[[0.09   0.2447 0.6652]
 [0.3333 0.3333 0.3333]]
>>> print(smax.logsumexp(x, axis=1).round(4))
[3.4076 2.0986]

The precision and the behaviour on NaN, infinities, fully masked rows and empty
tensors are those of the C++ library (docs/SEMANTICS.md); errors carry its message.
"""

from __future__ import annotations

import math
import operator
import sys
from typing import Any, Literal, Optional, TypeVar

import numpy as np

from . import _smax

__version__: str = _smax.version()

__all__ = [
    "softmax",
    "log_softmax",
    "logsumexp",
    "set_num_threads",
    "get_num_threads",
    "info",
    "plan",
    "softmax_backward",
    "log_softmax_backward",
    "cross_entropy",
    "__version__",
]

ArrayT = TypeVar("ArrayT")
Algorithm = Literal["auto", "naive", "safe", "fused", "tiled", "online"]
PassOrder = Literal["reverse", "forward"]
AllMasked = Literal["nan", "zero"]
Stores = Literal["auto", "cached", "streaming"]

_NUMPY_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16))
_SMAX_DTYPE_NAMES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}
_INT_MAX = 2**31 - 1  # the C++ options hold axis and threads in an int

# The thread count a call uses when it passes threads=None; 0 means every core.
_default_threads = 0


def set_num_threads(n: int) -> None:
    """Set the number of threads later calls use when they pass ``threads=None``.

    ``0`` means every core (the initial setting). Like ``torch.set_num_threads``,
    this is process-wide; ``threads=`` on a call overrides it for that call only.

    >>> smax.set_num_threads(1); smax.get_num_threads()
    1
    >>> smax.set_num_threads(0)
    """
    global _default_threads
    n = operator.index(n)
    if not 0 <= n <= _INT_MAX:
        raise ValueError(f"set_num_threads: threads must be >= 0 (0 = all cores), got {n}")
    _default_threads = n


def get_num_threads() -> int:
    """The number of threads a call with ``threads=None`` uses (every core unless
    ``set_num_threads`` said otherwise)."""
    return _default_threads or _smax.machine()["threads"]


def softmax(
    x: ArrayT,
    axis: int = -1,
    *,
    temperature: float = 1.0,
    algorithm: Algorithm = "auto",
    pass_order: PassOrder = "reverse",
    all_masked: AllMasked = "nan",
    stores: Stores = "auto",
    out: Optional[Any] = None,
    threads: Optional[int] = None,
) -> ArrayT:
    """``softmax(x / temperature)`` along ``axis``.

    Args:
        x: a NumPy array, a CPU tensor that speaks DLPack (torch, JAX, ...), or
            anything ``numpy.asarray`` takes. Read in place, whatever its strides.
        axis: the axis to normalise; negative counts from the end.
        temperature: ``T`` in ``softmax(x / T)``; finite and > 0.
        algorithm: ``"auto"`` (the planner picks from the shape and the machine's
            caches), or one variant: ``"naive"`` (no max subtraction: overflows on
            purpose), ``"safe"``, ``"fused"`` (rows up to 16384), ``"tiled"``, ``"online"``.
        pass_order: ``"reverse"`` (default) or ``"forward"``: the direction of the
            second pass of ``tiled`` and ``online``.
        all_masked: what a row of only ``-inf`` gives: ``"nan"`` (as PyTorch and
            ONNX) or ``"zero"`` (as attention code wants).
        stores: how the output is written: ``"cached"`` (through the cache),
            ``"streaming"`` (around it: less memory traffic, nothing left in cache)
            or ``"auto"`` (default: streaming where the call moves more than
            the last-level cache, at most 48 MiB). Results do not depend on it.
        out: write here instead of a new array: same shape and dtype as ``x``, any
            strides that do not overlap themselves; may be ``x`` itself.
        threads: threads for this call; ``None`` uses ``set_num_threads``'s
            setting, ``0`` every core. Results do not depend on it.

    Returns:
        ``out`` if given, else a new array of ``x``'s kind (NumPy for NumPy input,
        a torch tensor for a torch tensor), shape and dtype.

    Raises:
        TypeError: ``x`` or ``out`` has an unsupported or mismatched dtype.
        numpy.exceptions.AxisError: ``axis`` is out of range (a ValueError).
        ValueError: any other bad argument (shape of ``out``, temperature, ...).

    >>> print(smax.softmax(np.array([1.0, 100.0, 100000.0])))
    [0. 0. 1.]
    >>> x = np.array([[0.0, 1.0], [2.0, 3.0]], dtype=np.float32)
    >>> _ = smax.softmax(x, axis=0, temperature=0.5, out=x)  # in place
    >>> print(x.round(4))
    [[0.018 0.018]
     [0.982 0.982]]
    """
    return _elementwise("softmax", x, axis, temperature, algorithm, pass_order, all_masked, out, threads, stores)


def log_softmax(
    x: ArrayT,
    axis: int = -1,
    *,
    temperature: float = 1.0,
    algorithm: Algorithm = "auto",
    pass_order: PassOrder = "reverse",
    all_masked: AllMasked = "nan",
    stores: Stores = "auto",
    out: Optional[Any] = None,
    threads: Optional[int] = None,
) -> ArrayT:
    """``x / T - logsumexp(x / T)`` along ``axis``, computed directly (not as the log
    of the softmax, so tiny probabilities do not underflow to ``-inf``).

    Arguments, return value and errors as for :func:`softmax`; under
    ``all_masked="zero"`` a row of only ``-inf`` gives ``-inf``.

    >>> print(smax.log_softmax(np.array([0.0, 0.0, 1000.0])))
    [-1000. -1000.     0.]
    """
    return _elementwise("log_softmax", x, axis, temperature, algorithm, pass_order, all_masked, out, threads, stores)


def logsumexp(
    x: ArrayT,
    axis: int = -1,
    keepdims: bool = False,
    *,
    temperature: float = 1.0,
    algorithm: Algorithm = "auto",
    pass_order: PassOrder = "reverse",
    out: Optional[Any] = None,
    threads: Optional[int] = None,
) -> ArrayT:
    """``log(sum(exp(x / T)))`` over ``axis``, which is removed from the shape (kept
    as 1 with ``keepdims``). An empty axis gives ``-inf``; a rank-0 ``x`` gives ``x / T``.

    ``out`` must have the reduced shape and ``x``'s dtype, and must not overlap ``x``.
    Other arguments, return value and errors as for :func:`softmax`.

    >>> x = np.array([[0.0, 0.0], [1000.0, 1000.0]])
    >>> smax.logsumexp(x, axis=1).round(3).tolist()
    [0.693, 1000.693]
    >>> smax.logsumexp(x, axis=0, keepdims=True).shape
    (1, 2)
    """
    kind = _wrap_input("logsumexp", x)
    axis = _axis_arg("logsumexp", axis)
    keepdims = bool(keepdims)
    shape = _smax.output_shape("logsumexp", list(kind.shape), axis, keepdims)
    return _run("logsumexp", kind, shape, axis, temperature, algorithm, pass_order, "nan", out, threads, keepdims)


def info() -> dict:
    """What ``smax info`` prints, as a dict: version, cpu_model, architecture,
    vendor ("intel", "amd", or "" where not detected), features (list), l1d_bytes,
    l2_bytes, l3_bytes, threads (what 0 threads means) and assumed (the fields the
    OS did not report, for which defaults stand in).

    >>> sorted(smax.info())  # doctest: +NORMALIZE_WHITESPACE
    ['architecture', 'assumed', 'cpu_model', 'features', 'l1d_bytes', 'l2_bytes',
     'l3_bytes', 'threads', 'vendor', 'version']
    """
    return _smax.machine()


def plan(
    shape: Any,
    axis: int = -1,
    dtype: Any = "float32",
    op: Literal["softmax", "log_softmax", "logsumexp"] = "softmax",
    *,
    temperature: float = 1.0,
    algorithm: Algorithm = "auto",
    pass_order: PassOrder = "reverse",
    all_masked: AllMasked = "nan",
    stores: Stores = "auto",
    threads: Optional[int] = None,
) -> dict:
    """The plan smax would run for a C-contiguous tensor of this shape, and why
    (what ``smax info --shape ...`` prints), as a dict: op, shape, dtype, algorithm,
    pass_order, rows, length, block_length, chunk_length (elements per chunk of a
    split row, 0 if rows are not split), panel_width (columns per panel for a
    non-last axis, 0 if the axis runs as rows), threads, stores (``"cached"`` or
    ``"streaming"``), reason.

    ``dtype`` is a name (``"float32"``, ``"bf16"``, ...), a NumPy dtype or a torch dtype.

    >>> p = smax.plan((64, 1000), dtype="float32")
    >>> p["rows"], p["length"], p["algorithm"] in ("safe", "fused", "tiled", "online")
    (64, 1000, True)
    """
    op_name = str(op).replace("-", "_")
    return _smax.plan(
        op_name,
        [operator.index(n) for n in shape],
        _dtype_arg(dtype),
        _axis_arg(op_name, axis),
        float(temperature),
        str(algorithm),
        str(pass_order),
        str(all_masked),
        str(stores),
        _threads_arg(op_name, threads),
    )


# ---------------------------------------------------------------------------------
# How an input of each kind is read, and how an output of the same kind is made.


class _Input:
    """One input, ready for the extension: ``arg`` is what it reads (the array
    itself, or a uint16 view of bfloat16 bits), ``shape`` and ``dtype`` describe it,
    ``allocate(shape)`` makes an output of the same kind and dtype, and
    ``finish(out)`` turns a freshly allocated output into what the caller gets."""

    def __init__(self, arg, bf16_bits, shape, allocate, finish=lambda out: out):
        self.arg = arg
        self.bf16_bits = bf16_bits
        self.shape = tuple(shape)
        self.allocate = allocate
        self.finish = finish


def _numpy_arg(op: str, which: str, a: np.ndarray):
    """The array the extension reads for NumPy array ``a``, and whether it holds
    bfloat16 bits. ml_dtypes' bfloat16 cannot leave NumPy through DLPack or the
    buffer protocol, so its bits go as uint16 and a flag says what they are."""
    if a.dtype in _NUMPY_DTYPES:  # first: dtype.name costs microseconds in NumPy 2
        return a, False
    if a.dtype.name == "bfloat16" and a.dtype.itemsize == 2:
        return a.view(np.uint16), True
    raise TypeError(f"{op}: unsupported {which} dtype {a.dtype}; use float32, float64, float16 or bfloat16")


def _torch_arg(op: str, which: str, t):
    torch = sys.modules["torch"]
    if t.device.type != "cpu":
        raise ValueError(f"{op}: {which} is on device {t.device}; smax runs on the CPU")
    if t.requires_grad:
        # Handing back a result with no gradient would silently cut the graph.
        name = "x" if which == "input" else "out"
        raise ValueError(f"{op}: {name} requires grad and smax records no autograd; pass {name}.detach()")
    if t.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        name = str(t.dtype).replace("torch.", "")
        raise TypeError(f"{op}: unsupported {which} dtype {name}; use float32, float64, float16 or bfloat16")
    return t


def _is_torch(x) -> bool:
    torch = sys.modules.get("torch")  # never import torch: if x is a tensor, it is loaded
    return torch is not None and isinstance(x, torch.Tensor)


def _numpy_dtype(name: str, op: str) -> np.dtype:
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError(f"{op}: a bfloat16 result as a NumPy array needs the ml_dtypes package") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _same_kind_as(x, out: np.ndarray):
    """``out`` (a new NumPy array) as the array type of ``x``, a DLPack producer
    that is neither NumPy nor torch. Its framework's ``from_dlpack`` shares the
    memory; where there is none, or it cannot take the dtype, NumPy is returned."""
    top = type(x).__module__.partition(".")[0]
    if top in ("jax", "jaxlib"):
        import jax.numpy as jnp  # jax arrays are immutable: this copy is the result

        return jnp.asarray(out)
    from_dlpack = getattr(sys.modules.get(top), "from_dlpack", None)
    if from_dlpack is not None:
        try:
            return from_dlpack(out)
        except (TypeError, ValueError, BufferError, RuntimeError):
            pass
    return out


# Outputs of at least this many bytes start at a cache line (_empty_aligned).
_ALIGNED_OUTPUT_BYTES = 1 << 20


def _empty_aligned(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` that starts at a 64-byte boundary where it is large.

    NumPy's large arrays start 16 bytes past a page (where malloc puts them), and
    the kernels' streamed outputs (softmax and log_softmax beyond the
    last-level cache) run faster where each row starts on a whole vector."""
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes < _ALIGNED_OUTPUT_BYTES:
        return np.empty(shape, dtype=dtype)
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def _wrap_input(op: str, x) -> _Input:
    if isinstance(x, np.ndarray):
        arg, bits = _numpy_arg(op, "input", x)
        return _Input(arg, bits, x.shape, lambda shape: _empty_aligned(shape, x.dtype))
    if _is_torch(x):
        torch = sys.modules["torch"]
        t = _torch_arg(op, "input", x)
        return _Input(t, False, t.shape, lambda shape: torch.empty(tuple(shape), dtype=t.dtype))
    if hasattr(x, "__dlpack__"):
        try:
            shape, dtype_name = _smax.describe(x)
        except TypeError:
            raise TypeError(f"{op}: cannot read {type(x).__name__} as a CPU array through DLPack") from None
        if dtype_name not in _SMAX_DTYPE_NAMES:
            raise TypeError(f"{op}: unsupported input dtype {dtype_name}; use float32, float64, float16 or bfloat16")
        dtype = _numpy_dtype(dtype_name, op)
        return _Input(x, False, shape, lambda s: _empty_aligned(s, dtype), lambda out: _same_kind_as(x, out))
    # Python scalars, lists, NumPy scalars: as NumPy makes them (this one copies).
    return _wrap_input(op, np.asarray(x))


def _out_arg(op: str, out):
    """What the extension writes for the caller's ``out``, and whether it holds bfloat16 bits."""
    if isinstance(out, np.ndarray):
        if not out.flags.writeable:
            raise ValueError(f"{op}: out is a read-only array")
        return _numpy_arg(op, "output", out)
    if _is_torch(out):
        return _torch_arg(op, "output", out), False
    if hasattr(out, "__dlpack__"):
        return out, False
    raise TypeError(f"{op}: out must be a NumPy array or a CPU tensor that speaks DLPack, got {type(out).__name__}")


def _axis_arg(op: str, axis) -> int:
    axis = operator.index(axis)  # a tuple or a float is a TypeError, as in NumPy
    if not -_INT_MAX <= axis <= _INT_MAX:
        raise np.exceptions.AxisError(f"{op}: axis {axis} is out of range")
    return axis


def _threads_arg(op: str, threads) -> int:
    if threads is None:
        return _default_threads
    threads = operator.index(threads)
    if not 0 <= threads <= _INT_MAX:
        raise ValueError(f"{op}: threads must be >= 0 (0 = all cores), got {threads}")
    return threads


def _dtype_arg(dtype) -> str:
    """smax's name ("f32", ...) for a dtype name, a NumPy dtype or type, or a torch dtype."""
    if isinstance(dtype, str):
        name = dtype
    elif type(dtype).__module__.startswith("torch"):
        name = str(dtype).replace("torch.", "")
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype)
    return _SMAX_DTYPE_NAMES.get(name, name)  # an unknown name: the extension says so


def _elementwise(op, x, axis, temperature, algorithm, pass_order, all_masked, out, threads, stores="auto"):
    kind = _wrap_input(op, x)
    return _run(op, kind, kind.shape, _axis_arg(op, axis), temperature, algorithm, pass_order, all_masked, out,
                threads, False, stores)


def _run(op, kind: _Input, out_shape, axis, temperature, algorithm, pass_order, all_masked, out, threads, keepdims,
         stores="auto"):
    threads = _threads_arg(op, threads)
    if out is None:
        result = kind.allocate(tuple(out_shape))
        out_arg, out_bits = _out_arg(op, result)
    else:
        result = out
        out_arg, out_bits = _out_arg(op, out)
    _smax.run(op, kind.arg, out_arg, axis, float(temperature), str(algorithm), str(pass_order), str(all_masked),
              str(stores), threads, keepdims, kind.bf16_bits, out_bits)
    return result if out is not None else kind.finish(result)


# The training ops; they use the helpers above.
from .training import cross_entropy, log_softmax_backward, softmax_backward  # noqa: E402
