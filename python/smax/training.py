"""The training ops: softmax / log-softmax backward and cross-entropy with its
gradient, with PyTorch-like signatures. Arrays are read where they are (NumPy or any
CPU tensor that speaks DLPack), results come back as the input's kind. Semantics in
docs/SEMANTICS.md ("Training ops")."""

from __future__ import annotations

import sys
from typing import Any, Literal, Optional, Union

import numpy as np

from . import _smax
from . import _axis_arg, _is_torch, _numpy_arg, _out_arg, _threads_arg, _torch_arg, _wrap_input

Reduction = Literal["none", "mean", "sum"]

_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))


def softmax_backward(y, dy, axis: int = -1, *, temperature: float = 1.0, out: Optional[Any] = None,
                     threads: Optional[int] = None, stores: str = "auto"):
    """The gradient with respect to ``x`` of ``y = softmax(x / temperature)`` along
    ``axis``, given ``dy``, the gradient with respect to ``y``:
    ``dx = y * (dy - sum(y * dy)) / temperature``, in one reduction pass and one write
    pass. ``out`` may be ``dy`` or ``y`` itself (in place). ``stores``: how the result
    is written, as for :func:`smax.softmax` (``"auto"`` streams it around the cache
    where ``y``, ``dy`` and the result exceed a sixth of the last-level cache,
    counting at most 48 MiB of it).

    >>> y = smax.softmax(np.array([0.0, 1.0, 2.0])); dy = np.array([1.0, 0.0, 0.0])
    >>> print(smax.softmax_backward(y, dy).round(4))
    [ 0.0819 -0.0220 -0.0599]
    """
    return _backward("softmax_backward", y, dy, axis, temperature, out, threads, stores)


def log_softmax_backward(log_y, dy, axis: int = -1, *, temperature: float = 1.0, out: Optional[Any] = None,
                         threads: Optional[int] = None, stores: str = "auto"):
    """The gradient with respect to ``x`` of ``log_y = log_softmax(x / temperature)``:
    ``dx = (dy - exp(log_y) * sum(dy)) / temperature``. Arguments as for
    :func:`softmax_backward`."""
    return _backward("log_softmax_backward", log_y, dy, axis, temperature, out, threads, stores)


def cross_entropy(input, target, weight=None, ignore_index: Optional[int] = -100, reduction: Reduction = "mean",
                  label_smoothing: float = 0.0, *, axis: int = 1, grad: Union[bool, Any] = False,
                  log_prob: Union[bool, Any] = False, out: Optional[Any] = None, threads: Optional[int] = None,
                  stores: str = "auto"):
    """``torch.nn.functional.cross_entropy``, with its gradient in the same call.

    Args:
        input: logits, shape (N, C) or (N, C, d1, ..., dk) (or (C,)); the class axis
            is ``axis`` (1 as PyTorch; -1 for (..., C)).
        target: class indices (int64 or int32, ``input``'s shape without the class
            axis) or class probabilities (``input``'s shape and dtype).
        weight: class weights, shape (C,), ``input``'s dtype.
        ignore_index: targets equal to it add no loss and no gradient (class indices
            only; any value, also outside [0, C)). ``None`` ignores nothing.
        reduction: ``"none"``, ``"sum"`` or ``"mean"`` (divided by the sum of the
            weights of the non-ignored targets; NaN when all are ignored).
        label_smoothing: in [0, 1].
        grad: ``True`` to also return the gradient of the loss with respect to
            ``input`` (as autograd gives with ``loss.backward()``; for ``"none"``, of
            the sum), or an array to write it into (``input`` itself works: in place).
        log_prob: ``True`` (or an array) to also return ``log_softmax(input)`` along
            the class axis.
        out: an array for the loss.
        threads: threads to use (``None``: all cores).
        stores: how the gradient is written: ``"cached"``, ``"streaming"`` (around the
            cache) or ``"auto"`` (streams where the logits and the gradient exceed
            the last-level cache, at most 48 MiB); never changes a bit of it.

    Returns:
        the loss, or ``(loss, grad)``, ``(loss, log_prob)`` or ``(loss, grad, log_prob)``
        when asked for.
    """
    op = "cross_entropy"
    logits = _wrap_input(op, input)
    axis = _axis_arg(op, axis)
    threads = _threads_arg(op, threads)
    target_arg, target_bits, index_targets = _target_arg(op, target)
    weight_arg, weight_bits = (None, False)
    if weight is not None:
        weight_kind = _wrap_input(op, weight)
        weight_arg, weight_bits = weight_kind.arg, weight_kind.bf16_bits
    rank = len(logits.shape)
    if reduction == "none" and -rank <= axis < rank:
        loss_shape = tuple(e for k, e in enumerate(logits.shape) if k != axis % rank)
    else:
        loss_shape = ()
    outputs = []

    def output(given, shape):
        if given is None or given is False:
            return None, False, None
        if given is True:
            result = logits.allocate(tuple(shape))
            arg, bits = _out_arg(op, result)
            outputs.append((result, True))
            return arg, bits, result
        arg, bits = _out_arg(op, given)
        outputs.append((given, False))
        return arg, bits, given

    loss_arg, loss_bits, _ = output(True if out is None else out, loss_shape)
    grad_arg, grad_bits, _ = output(grad, logits.shape)
    lp_arg, lp_bits, _ = output(log_prob, logits.shape)
    _smax.cross_entropy(logits.arg, target_arg, loss_arg, weight_arg, grad_arg, lp_arg, axis, str(reduction),
                        ignore_index if index_targets else None, float(label_smoothing), threads, str(stores),
                        logits.bf16_bits, target_bits, weight_bits, loss_bits, grad_bits, lp_bits)
    results = [logits.finish(value) if fresh else value for value, fresh in outputs]
    return results[0] if len(results) == 1 else tuple(results)


def _target_arg(op: str, target):
    """What the extension reads for ``target``, whether it holds bfloat16 bits, and
    whether it holds class indices."""
    if isinstance(target, np.ndarray):
        if target.dtype in _INDEX_DTYPES:
            return target, False, True
        arg, bits = _numpy_arg(op, "target", target)
        return arg, bits, False
    if _is_torch(target):
        torch = sys.modules["torch"]
        if target.device.type != "cpu":
            raise ValueError(f"{op}: target is on device {target.device}; smax runs on the CPU")
        if target.dtype in (torch.int64, torch.int32):
            return target, False, True
        return _torch_arg(op, "target", target), False, False
    if hasattr(target, "__dlpack__"):
        return target, False, "int" in _smax.describe(target)[1]
    return _target_arg(op, np.asarray(target))


def _backward(op, y, dy, axis, temperature, out, threads, stores):
    kind = _wrap_input(op, y)
    dy_kind = _wrap_input(op, dy)
    axis = _axis_arg(op, axis)
    threads = _threads_arg(op, threads)
    if out is None:
        result = kind.allocate(kind.shape)
        out_arg, out_bits = _out_arg(op, result)
    else:
        result = out
        out_arg, out_bits = _out_arg(op, out)
    _smax.backward(op, kind.arg, dy_kind.arg, out_arg, axis, float(temperature), threads, str(stores),
                   kind.bf16_bits, dy_kind.bf16_bits, out_bits)
    return result if out is not None else kind.finish(result)
