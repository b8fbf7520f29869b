# Types of the compiled core (python/src/smax_ext.cpp). Use the smax package's
# functions instead: they allocate outputs, pick defaults and check dtypes.
from typing import Any, Sequence

def run(
    op: str,
    x: Any,
    out: Any,
    axis: int,
    temperature: float,
    algorithm: str,
    pass_order: str,
    all_masked: str,
    stores: str,
    threads: int,
    keepdims: bool,
    x_bf16_bits: bool,
    out_bf16_bits: bool,
) -> None: ...
def describe(x: Any) -> tuple[tuple[int, ...], str]: ...
def output_shape(op: str, shape: Sequence[int], axis: int, keepdims: bool) -> list[int]: ...
def plan(
    op: str,
    shape: Sequence[int],
    dtype: str,
    axis: int,
    temperature: float,
    algorithm: str,
    pass_order: str,
    all_masked: str,
    stores: str,
    threads: int,
) -> dict[str, Any]: ...
def machine() -> dict[str, Any]: ...
def version() -> str: ...
def backward(
    op: str,
    y: Any,
    dy: Any,
    out: Any,
    axis: int,
    temperature: float,
    threads: int,
    stores: str,
    y_bf16_bits: bool,
    dy_bf16_bits: bool,
    out_bf16_bits: bool,
) -> None: ...
def cross_entropy(
    logits: Any,
    target: Any,
    loss: Any,
    weight: Any | None,
    grad: Any | None,
    log_prob: Any | None,
    axis: int,
    reduction: str,
    ignore_index: int | None,
    label_smoothing: float,
    threads: int,
    stores: str,
    logits_bf16_bits: bool,
    target_bf16_bits: bool,
    weight_bf16_bits: bool,
    loss_bf16_bits: bool,
    grad_bf16_bits: bool,
    log_prob_bf16_bits: bool,
) -> None: ...
