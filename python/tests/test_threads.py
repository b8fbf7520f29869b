"""Many Python threads calling at once get what one thread gets; the GIL is released
while a kernel runs."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import smax


def test_concurrent_calls_match_serial():
    rng = np.random.default_rng(5)
    inputs = [rng.normal(size=shape).astype(dtype)
              for shape in [(64, 500), (3, 20000), (128, 33), (1, 70000)]
              for dtype in (np.float32, np.float64, np.float16)]
    ops = [smax.softmax, smax.log_softmax, smax.logsumexp]
    jobs = [(op, i, threads) for op in ops for i in range(len(inputs)) for threads in (None, 1, 2)] * 4
    serial = {(op, i): op(inputs[i], threads=1) for op in ops for i in range(len(inputs))}

    def run(job):
        op, i, threads = job
        return op(inputs[i], threads=threads)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(run, jobs))
    for (op, i, _), got in zip(jobs, results):
        np.testing.assert_array_equal(got, serial[(op, i)])


def test_concurrent_in_place_on_separate_arrays():
    base = np.random.default_rng(6).normal(size=(16, 256, 257)).astype(np.float32)
    expected = smax.softmax(base)
    work = base.copy()
    threads = [threading.Thread(target=smax.softmax, args=(work[k],), kwargs={"out": work[k]}) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(work, expected)


def test_gil_is_released_during_a_kernel():
    """While one thread runs a long kernel, another keeps running Python: the
    longest pause it sees is far shorter than the kernel."""
    x = np.random.default_rng(7).normal(size=(1 << 24,)).astype(np.float32)
    out = np.empty_like(x)
    start = time.perf_counter()
    smax.softmax(x, out=out, threads=1, algorithm="safe")
    kernel = time.perf_counter() - start

    done = threading.Event()

    def worker():
        for _ in range(3):
            smax.softmax(x, out=out, threads=1, algorithm="safe")
        done.set()

    longest_gap, last = 0.0, time.perf_counter()
    thread = threading.Thread(target=worker)
    thread.start()
    while not done.is_set():
        now = time.perf_counter()
        longest_gap, last = max(longest_gap, now - last), now
        time.sleep(0.0005)
    thread.join()
    assert longest_gap < 0.5 * kernel, f"Python stalled {longest_gap:.3f} s during a {kernel:.3f} s kernel"


def test_set_num_threads_is_the_default():
    try:
        smax.set_num_threads(1)
        assert smax.get_num_threads() == 1
        x = np.ones((4, 8), np.float32)
        np.testing.assert_array_equal(smax.softmax(x), np.full((4, 8), 0.125, np.float32))
    finally:
        smax.set_num_threads(0)
    assert smax.get_num_threads() == smax.info()["threads"]
