"""The GIL is released while the library works (a ticking thread keeps ticking with
`sys.setswitchinterval(0.5)`), and calls from several threads give the right results."""

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tensorscope
from conftest import DATA, assert_same_array, write_safetensors


gil_only = pytest.mark.skipif(
    not getattr(sys, "_is_gil_enabled", lambda: True)(), reason="free-threaded Python: no GIL"
)


@pytest.fixture()
def slow_switch():
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


class Ticker(threading.Thread):
    """Increments a counter about every millisecond, needing the GIL each time."""

    def __init__(self):
        super().__init__(daemon=True)
        self.ticks = 0
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            time.sleep(0.001)
            self.ticks += 1


def ticks_during(fn, min_seconds):
    ticker = Ticker()
    ticker.start()
    time.sleep(0.05)  # the ticker is running
    start = ticker.ticks
    t0 = time.perf_counter()
    calls = 0
    while True:
        fn()
        calls += 1
        if time.perf_counter() - t0 >= min_seconds:
            break
    elapsed = time.perf_counter() - t0
    ticks = ticker.ticks - start
    ticker.done.set()
    ticker.join()
    return ticks, elapsed, calls


@pytest.mark.parametrize("verb", ["stats", "stats-moments", "diff", "open-get_tensor", "convert"])
def test_gil_released_during_work(big_safetensors, slow_switch, verb, tmp_path):
    p = str(big_safetensors)
    if verb == "stats":
        fn, secs = (lambda: tensorscope.stats(p)), 0.4
    elif verb == "stats-moments":
        fn, secs = (lambda: tensorscope.stats(p, moments=True)), 0.4
    elif verb == "diff":
        fn, secs = (lambda: tensorscope.diff(p, p)), 0.4
    elif verb == "open-get_tensor":
        # Quick calls (a view of the map), each of which releases the GIL.
        def fn():
            with tensorscope.safe_open(p, framework="np") as f:
                f.get_tensor("big")
        secs = 0.4
    else:
        out = tmp_path / "converted.safetensors"
        fn, secs = (lambda: tensorscope.convert(p, str(out))), 0.0
    # Warm the page cache so the work is CPU-bound, not disk-bound.
    fn()
    ticks, elapsed, calls = ticks_during(fn, secs)
    assert ticks > 20, (
        f"{verb}: only {ticks} ticks in {elapsed:.3f} s over {calls} calls: the GIL is held"
    )


@gil_only
def test_busy_python_holds_gil_sanity(slow_switch):
    """The ticker really needs the GIL: pure-Python busy work starves it."""
    def busy():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.3:
            pass
    ticks, elapsed, _ = ticks_during(busy, 0.3)
    assert ticks < 20, f"{ticks} ticks while Python held the GIL: the GIL test proves nothing"


# --------------------------------------------------------------------------- concurrent use


def _inputs(tmp_path):
    rng = np.random.default_rng(5)
    p = tmp_path / "threads.safetensors"
    write_safetensors(p, {f"t{i}": rng.standard_normal((64, 33)).astype(np.float32)
                          for i in range(20)})
    return [
        str(p),
        str(DATA / "numpy/savez_compressed_mixed.npz"),
        str(DATA / "pytorch/views_p5.pt"),
        str(DATA / "gguf/types.gguf"),
        str(DATA / "hdf5/chunked.h5"),
        str(DATA / "flax/chunked.msgpack"),
        str(DATA / "onnx/external_many/model.onnx"),
        str(DATA / "tensorflow/tf_sharded/ckpt-1.index"),
    ]


def _read_all(path):
    with tensorscope.safe_open(path, framework="np") as f:
        return {k: np.array(f.get_tensor(k), copy=True) for k in f.keys()}


def test_threads_with_their_own_safe_open(tmp_path):
    paths = _inputs(tmp_path)
    want = {p: _read_all(p) for p in paths}

    def work(i):
        p = paths[i % len(paths)]
        for _ in range(5):
            got = _read_all(p)
            assert got.keys() == want[p].keys()
            for k in got:
                assert_same_array(got[k], want[p][k], f"{p}:{k}")
            s = tensorscope.stats(p, moments=True)
            assert len(s["tensors"]) == len(want[p])
        return i

    with ThreadPoolExecutor(max_workers=8) as ex:
        assert sorted(ex.map(work, range(16))) == list(range(16))


def test_threads_sharing_one_safe_open(tmp_path):
    path = _inputs(tmp_path)[0]
    want = _read_all(path)
    with tensorscope.safe_open(path, framework="np") as f:
        def work(k):
            for _ in range(20):
                assert_same_array(f.get_tensor(k), want[k], k)
                assert_same_array(f.get_slice(k)[3:9, ::2], want[k][3:9, ::2], k)
            return k

        with ThreadPoolExecutor(max_workers=6) as ex:
            assert sorted(ex.map(work, sorted(want))) == sorted(want)


def test_ctrl_c_cancels_the_engine_and_raises_keyboard_interrupt(big_safetensors):
    """SIGINT during a long call: the engine stops at its next cancellation
    check and `KeyboardInterrupt` is raised, well before the work would end."""
    import signal
    import subprocess

    if not hasattr(signal, "SIGINT") or sys.platform == "win32":
        pytest.skip("sending SIGINT to a child process needs a POSIX system")
    code = (
        "import signal, sys, time, tensorscope\n"
        # Python leaves SIGINT ignored when the parent ignored it (a job
        # started with `&` by a shell without job control): Python's own
        # handler, which is what a terminal's Ctrl-C meets.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "print('ready', flush=True)\n"
        "t = time.monotonic()\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        tensorscope.stats(sys.argv[1])\n"
        "    print('finished', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted %.3f' % (time.monotonic() - t), flush=True)\n"
        "    sys.exit(3)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(big_safetensors)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 3, out
    assert out.startswith("interrupted"), out
