"""Time smax against the softmax of other libraries, in one process, on the same arrays.

    python -m smax.bench                                  # the default workloads
    python -m smax.bench --workload vocab,attention --threads 1 --json out.json

Implementations: smax itself, ``torch.softmax``, ONNX Runtime's Softmax (a one-node
model built in memory with the ``onnx`` package) and ``scipy.special.softmax``, each
where it is importable; a missing one is reported and skipped. Every implementation
returns a new array, as its users call it. For each, after a warm-up the median time
of ``--repeats`` samples is reported (a sample repeats short calls until it lasts
about 2 ms), with GB/s = (input + output bytes) / median, and the largest relative
error of the output against a float64 NumPy reference, over the outputs of at least
max(1e-30, the smallest normal of the dtype): below that, relative errors measure
underflow, not accuracy.

``--workload training`` (not in the default set) times the training ops instead, as
training code calls them: softmax and log-softmax forward then backward (smax's
forward and ``softmax_backward``/``log_softmax_backward`` against torch's forward
and autograd backward with a given ``dy``), and cross-entropy with the gradient of its
mean (``smax.cross_entropy(..., grad=True)`` against
``torch.nn.functional.cross_entropy`` forward and ``backward()``), on 8 x 128256 and
4096 x 32000 with random class-index targets. Its table gives each median and
torch's time over smax's.

``--json FILE`` writes {"tool", "machine", "results"} in the format of the C++
``smax bench --json`` (its fields that apply here): machine is ``smax.info()`` plus
smax_version and the versions of the libraries compared (null where missing); a
result's dtype is smax's name for it (f32, f64, f16, bf16).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Callable, NamedTuple

import numpy as np

import smax


class Case(NamedTuple):
    workload: str
    shape: tuple
    axis: int


# name -> the cases it runs. Rows of attention: batch 8 x 16 heads x 128 queries.
WORKLOADS: dict[str, list[Case]] = {
    "classify": [Case("classify", (256, 1000), -1)],
    "vocab": [Case("vocab", (rows, vocab), -1) for vocab in (32000, 128256) for rows in (1, 8)],
    "attention": [Case("attention", (8 * 16 * 128, keys), -1) for keys in (128, 256, 512, 1024, 2048)],
    "long-row": [Case("long-row", (1, 1 << 22), -1)],
    "axis": [Case("axis", (32, 81, 8732), 1)],
}
DEFAULT_WORKLOADS = ["classify", "vocab", "attention", "long-row", "axis"]
# The training workload: (rows, classes), the class axis last.
TRAINING_SHAPES = [(8, 128256), (4096, 32000)]
TRAINING_OPS = ("softmax fwd+bwd", "log_softmax fwd+bwd", "cross_entropy fwd+bwd")
DTYPES = ("float32", "float64", "float16", "bfloat16")
SMAX_DTYPE_NAMES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


class Impl(NamedTuple):
    name: str
    threads: int  # what the table reports: the threads it really uses
    # (x as a NumPy array, axis, dtype name) -> a callable running one softmax that
    # returns its output, or a string saying why this implementation cannot run it.
    prepare: Callable[[np.ndarray, int, str], "Callable[[], object] | str"]
    to_numpy: Callable[[object], np.ndarray]


def numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes  # checked in main()

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def make_smax(threads: int, algorithm: str) -> Impl:
    def prepare(x, axis, dtype):
        return lambda: smax.softmax(x, axis, algorithm=algorithm, threads=threads)

    return Impl(f"smax:{algorithm}", threads or smax.info()["threads"], prepare, np.asarray)


def make_torch(threads: int) -> "Impl | str":
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    torch.set_num_threads(threads or smax.info()["threads"])

    def prepare(x, axis, dtype):
        if dtype == "bfloat16":  # same bytes, seen as torch's bfloat16
            t = torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(x)
        return lambda: torch.softmax(t, axis)

    return Impl("torch", torch.get_num_threads(), prepare, lambda y: y.to(torch.float64).numpy())


def make_onnxruntime(threads: int) -> "Impl | str":
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime is not installed"
    try:
        from onnx import TensorProto, helper
    except ImportError:
        return "onnx is not installed (needed to build the Softmax model in memory)"
    element_types = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16}
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads  # 0 = ONNX Runtime's default: all cores
    options.inter_op_num_threads = 1

    def prepare(x, axis, dtype):
        if dtype not in element_types:
            return f"no {dtype} Softmax"
        element = element_types[dtype]
        node = helper.make_node("Softmax", ["x"], ["y"], axis=axis)
        graph = helper.make_graph(
            [node],
            "softmax",
            [helper.make_tensor_value_info("x", element, list(x.shape))],
            [helper.make_tensor_value_info("y", element, list(x.shape))],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = min(model.ir_version, 9)  # what released runtimes accept
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        # ONNX Runtime wants C-contiguous input; the copy is made here, outside the timing.
        contiguous = np.ascontiguousarray(x)
        return lambda: session.run(None, {"x": contiguous})[0]

    return Impl("onnxruntime", threads or smax.info()["threads"], prepare, np.asarray)


def make_scipy() -> "Impl | str":
    try:
        from scipy.special import softmax as scipy_softmax
    except ImportError:
        return "scipy is not installed"

    def prepare(x, axis, dtype):
        if dtype in ("float16", "bfloat16"):
            return f"no {dtype} support worth timing (NumPy computes in the storage type)"
        return lambda: scipy_softmax(x, axis=axis)

    return Impl("scipy", 1, prepare, np.asarray)  # NumPy's ufuncs run on one thread


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    """Median over `repeats` samples of the time of one call, after a warm-up. Short
    calls repeat within a sample so that a timer tick does not dominate it."""
    start = time.perf_counter()
    run()
    once = max(time.perf_counter() - start, 1e-7)
    inner = max(1, math.ceil(2e-3 / once))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            run()
        samples.append((time.perf_counter() - start) / inner)
    return float(np.median(samples))


def reference_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def max_rel_err(got: np.ndarray, ref: np.ndarray, dtype: str) -> float:
    floor = float(np.finfo(np.float16).tiny) if dtype == "float16" else 1e-30
    got = np.asarray(got, dtype=np.float64)
    mask = ref >= floor
    if not mask.any():
        return 0.0
    with np.errstate(invalid="ignore"):
        errors = np.abs(got[mask] - ref[mask]) / ref[mask]
    return float("inf") if np.isnan(errors).any() else float(errors.max())


def training_runs(op: str, x: np.ndarray, dy: np.ndarray, target: np.ndarray, dtype: str, threads: int,
                  use_torch: bool):
    """(smax's call, torch's call or None) for one training op on logits x: each runs
    the forward pass and the gradient with respect to x."""
    t = threads or None
    if op == "softmax fwd+bwd":
        def smax_run():
            return smax.softmax_backward(smax.softmax(x, -1, threads=t), dy, -1, threads=t)
    elif op == "log_softmax fwd+bwd":
        def smax_run():
            return smax.log_softmax_backward(smax.log_softmax(x, -1, threads=t), dy, -1, threads=t)
    else:
        def smax_run():
            return smax.cross_entropy(x, target, axis=-1, ignore_index=None, grad=True, threads=t)[1]
    if not use_torch:
        return smax_run, None
    import torch

    def tensor(a):
        if dtype == "bfloat16":  # same bytes, seen as torch's bfloat16
            return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16)
        return torch.from_numpy(a)

    tx = tensor(x).clone().requires_grad_(True)
    tdy = tensor(dy)
    ttarget = torch.from_numpy(target)

    def torch_run():
        tx.grad = None
        if op == "softmax fwd+bwd":
            torch.softmax(tx, -1).backward(tdy)
        elif op == "log_softmax fwd+bwd":
            torch.log_softmax(tx, -1).backward(tdy)
        else:
            torch.nn.functional.cross_entropy(tx, ttarget).backward()
        return tx.grad

    return smax_run, torch_run


def run_training(args, use_torch: bool, rng) -> list:
    print(f"{'op':<22} {'shape':<12} {'dtype':<9} {'smax':>10} {'torch':>10} {'torch/smax':>10}")
    results = []
    for rows, classes in TRAINING_SHAPES:
        for dtype in args.dtype:
            x = rng.normal(0.0, 3.0, size=(rows, classes)).astype(np.float32).astype(numpy_dtype(dtype))
            dy = rng.normal(0.0, 1.0, size=(rows, classes)).astype(np.float32).astype(numpy_dtype(dtype))
            target = rng.integers(0, classes, size=rows, dtype=np.int64)
            for op in TRAINING_OPS:
                smax_run, torch_run = training_runs(op, x, dy, target, dtype, args.threads, use_torch)
                times = {"smax": median_seconds(smax_run, args.repeats)}
                if torch_run is not None:
                    times["torch"] = median_seconds(torch_run, args.repeats)
                torch_text = format_time(times["torch"]) if "torch" in times else "-"
                ratio = f"{times['torch'] / times['smax']:.2f}x" if "torch" in times else "-"
                print(f"{op:<22} {rows}x{classes:<{11 - len(str(rows))}} {dtype:<9} {format_time(times['smax']):>10} "
                      f"{torch_text:>10} {ratio:>10}")
                for impl, median in times.items():
                    results.append({"workload": "training", "op": op, "shape": [rows, classes], "axis": -1,
                                    "dtype": SMAX_DTYPE_NAMES[dtype], "threads": args.threads, "impl": impl,
                                    "median_s": median, "ok": True})
    return results


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m smax.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default=",".join(DEFAULT_WORKLOADS),
                        help=f"comma-separated, from: {', '.join(WORKLOADS)}, training (default: all but training)")
    parser.add_argument("--dtype", default="float32", help=f"comma-separated, from: {', '.join(DTYPES)}")
    parser.add_argument("--threads", type=int, default=0, help="threads for every implementation (0 = all cores)")
    parser.add_argument("--repeats", type=int, default=7, help="timed samples per measurement (the median is kept)")
    parser.add_argument("--algorithm", default="auto",
                        help="comma-separated smax algorithms to time (auto, safe, fused, tiled, online, naive)")
    parser.add_argument("--impl", default="smax,torch,onnxruntime,scipy",
                        help="comma-separated implementations to run: smax, torch, onnxruntime, scipy")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    args.workload = [w.strip() for w in args.workload.split(",") if w.strip()]
    args.dtype = [d.strip() for d in args.dtype.split(",") if d.strip()]
    args.algorithm = [a.strip() for a in args.algorithm.split(",") if a.strip()]
    args.impl = [i.strip() for i in args.impl.split(",") if i.strip()]
    for name, given, known in [("workload", args.workload, [*WORKLOADS, "training"]), ("dtype", args.dtype, DTYPES),
                               ("impl", args.impl, ("smax", "torch", "onnxruntime", "scipy"))]:
        unknown = [g for g in given if g not in known]
        if unknown:
            parser.error(f"unknown {name} {', '.join(unknown)}; use {', '.join(known)}")
    if args.threads < 0 or args.repeats < 1:
        parser.error("--threads must be >= 0 and --repeats >= 1")
    return args


def library_versions() -> dict:
    """Each compared library's version, or None where it is not importable."""
    versions = {}
    for name in ("torch", "onnxruntime", "scipy"):
        try:
            versions[name] = __import__(name).__version__
        except ImportError:
            versions[name] = None
    return versions


def build_impls(args) -> list[Impl]:
    impls: list[Impl] = []
    makers = {
        "smax": lambda: [make_smax(args.threads, algorithm) for algorithm in args.algorithm],
        "torch": lambda: make_torch(args.threads),
        "onnxruntime": lambda: make_onnxruntime(args.threads),
        "scipy": make_scipy,
    }
    for name in args.impl:
        made = makers[name]()
        if isinstance(made, str):
            print(f"skipped {name}: {made}")
        else:
            impls.extend(made if isinstance(made, list) else [made])
    return impls


def main(argv=None) -> int:
    args = parse_args(argv)
    if "bfloat16" in args.dtype:
        try:
            import ml_dtypes  # noqa: F401
        except ImportError:
            print("skipped bfloat16: NumPy needs the ml_dtypes package for it")
            args.dtype = [d for d in args.dtype if d != "bfloat16"]
    machine = smax.info()
    print(f"smax {machine['version']} on {machine['cpu_model']} ({machine['architecture']}, "
          f"{machine['threads']} threads); Python {sys.version.split()[0]}, NumPy {np.__version__}")
    rng = np.random.default_rng(0)
    results = []
    if "training" in args.workload:
        args.workload = [w for w in args.workload if w != "training"]
        use_torch = "torch" in args.impl and not isinstance(make_torch(args.threads), str)
        if "torch" in args.impl and not use_torch:
            print("training: torch is not installed; smax only")
        results += run_training(args, use_torch, rng)
        if not args.workload:
            return write_report(args, machine, results)
    impls = build_impls(args)

    header = f"{'workload':<10} {'shape':<16} {'axis':>4} {'dtype':<8} {'threads':>7} {'impl':<12} " \
             f"{'median':>10} {'GB/s':>8} {'max rel err':>11}"
    print(header)
    print("-" * len(header))
    for case in (c for w in args.workload for c in WORKLOADS[w]):
        for dtype in args.dtype:
            x = rng.normal(0.0, 3.0, size=case.shape).astype(np.float32).astype(numpy_dtype(dtype))
            ref = reference_softmax(x, case.axis)
            shape_text = "x".join(map(str, case.shape))
            for impl in impls:
                try:
                    run = impl.prepare(x, case.axis, dtype)
                    if isinstance(run, str):
                        print(f"{case.workload:<10} {shape_text:<16} {impl.name}: skipped, {run}")
                        continue
                    median = median_seconds(run, args.repeats)
                    err = max_rel_err(impl.to_numpy(run()), ref, dtype)
                except Exception as error:  # a library's failure is a line in the table, not a crash
                    print(f"{case.workload:<10} {shape_text:<16} {impl.name}: failed, {type(error).__name__}: {error}")
                    continue
                gbps = 2 * x.nbytes / median / 1e9
                print(f"{case.workload:<10} {shape_text:<16} {case.axis:>4} {dtype:<8} {impl.threads:>7} "
                      f"{impl.name:<12} {format_time(median):>10} {gbps:>8.2f} {err:>11.2e}")
                results.append({"workload": case.workload, "shape": list(case.shape), "axis": case.axis,
                                "dtype": SMAX_DTYPE_NAMES[dtype], "threads": impl.threads, "impl": impl.name,
                                "median_s": median, "gbps": gbps,
                                "max_rel_err": err if math.isfinite(err) else None,  # strict JSON has no inf
                                "ok": True})
    return write_report(args, machine, results)


def write_report(args, machine: dict, results: list) -> int:
    if args.json:
        report_machine = dict(machine, smax_version=machine["version"], libraries=library_versions())
        with open(args.json, "w") as f:
            json.dump({"tool": "python -m smax.bench", "machine": report_machine, "results": results}, f, indent=1)
        print(f"wrote {args.json}")
    return 0


def format_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


if __name__ == "__main__":
    sys.exit(main())
