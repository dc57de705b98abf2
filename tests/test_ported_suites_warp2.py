"""NVIDIA Warp's warp/tests/ test_atomic_cas.py and test_atomic_bitwise.py, not in
test_ported_suites_warp.py or test_ported_suites_atomics.py, ported test by test:

* test_atomic_cas: a spin lock (``while atomic_cas(lock, 0, 0, 1) == 1: pass``, released with
  ``atomic_exch``) around a counter read with an exchange pair ("volatile_read") and written
  with a plain store, by 100 work items; the lock element in a 1-D to 4-D array; int32,
  uint32, int64, uint64, float32 and float64 (SPEC's atomic types; the 2-D to 4-D locks for
  int32 only). The counter must be 100.
* test_atomic_bitwise: every bit of 64 uint32 words and-ed, or-ed and xor-ed from another
  array by its own work item (32 per word) with ``atomic_and/or/xor``, and the vector and
  matrix variants (vec3ui, mat33ui) as rows of 3 and 9 words; against NumPy's ``a & b``,
  ``a | b``, ``a ^ b``.

Where SPEC differs from upstream (ported as SPEC reads, or not ported):

* Warp's ``a[i] &= v`` on an array is an atomic; here an augmented assignment to an array
  element is a plain read-modify-write (SPEC 3), so upstream's op types 0-2 are data races:
  the interpreter's check mode reports them (``DataRaceError``) and the port checks that.
* A spin lock needs the work item holding the lock to make progress while others of its group
  spin. The CPU (OpenMP threads), OpenCL on PoCL (work items of a group run one after another)
  and the interpreter give that; WebGPU does not promise it (WGSL has no forward-progress
  guarantee between invocations), and on lavapipe the spinning lanes of the holder's SIMD group
  run until the 65535-iteration loop limit (docs/webgpu.md) and then leave the loop as if they
  held the lock: the counter ends at 1, silently. The spin-lock case is therefore not run on
  WebGPU (docs/webgpu.md says so); the bitwise atomics are.
* No vector or matrix types: a vec3ui / mat33ui element is a row of a 2-D uint32 array, its
  components updated by one atomic each."""
import numpy as np
import pytest

import tinykernels as tk
from autodiff_helpers import backend_params, get, put


@tk.func
def spinlock_acquire(lock, idx):
    while tk.atomic_cas(lock, idx, lock.dtype(0), lock.dtype(1)) == 1:
        pass


@tk.func
def spinlock_release(lock, idx):
    tk.atomic_exchange(lock, idx, lock.dtype(0))


@tk.func
def volatile_read(ptr, index):
    value = tk.atomic_exchange(ptr, index, ptr.dtype(0))
    tk.atomic_exchange(ptr, index, value)
    return value


@tk.kernel
def spinlock_counter_1d(counter, lock):
    spinlock_acquire(lock, 0)
    value = volatile_read(counter, 0)
    counter[0] = value + counter.dtype(1)
    spinlock_release(lock, 0)


@tk.kernel
def spinlock_counter_2d(counter, lock):
    spinlock_acquire(lock, (0, 0))
    value = volatile_read(counter, 0)
    counter[0] = value + counter.dtype(1)
    spinlock_release(lock, (0, 0))


@tk.kernel
def spinlock_counter_3d(counter, lock):
    spinlock_acquire(lock, (0, 0, 0))
    value = volatile_read(counter, 0)
    counter[0] = value + counter.dtype(1)
    spinlock_release(lock, (0, 0, 0))


@tk.kernel
def spinlock_counter_4d(counter, lock):
    spinlock_acquire(lock, (0, 0, 0, 0))
    value = volatile_read(counter, 0)
    counter[0] = value + counter.dtype(1)
    spinlock_release(lock, (0, 0, 0, 0))


SPIN = {1: spinlock_counter_1d, 2: spinlock_counter_2d, 3: spinlock_counter_3d, 4: spinlock_counter_4d}


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'CL', 'CUDA'), scope="module")
def spinbe(request):
    """backends whose work items make progress while others of their group spin"""
    return tk.backend(request.param)


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64])
def test_atomic_cas_spinlock(spinbe, dt):
    """test_cas_{1d,2d,3d,4d}_<type>: 100 items pass a spin lock one at a time; the counter,
    read through an exchange pair and written plainly inside the lock, ends at 100 (the lock
    in a 1-D to 4-D array for int32, 1-D for the other types: the CI budget)"""
    for ndim, k in SPIN.items() if dt == np.int32 else [(1, SPIN[1])]:
        counter = put(spinbe, np.zeros(1, dt))
        lock = put(spinbe, np.zeros((1,) * ndim, dt))
        k(spinbe)(counter, lock, ndrange=100)
        tk.synchronize(spinbe)
        assert get(counter)[0] == 100, ndim
        assert get(lock).ravel()[0] == 0


@tk.kernel
def atomic_bitwise(a, b: tk.Const, op_type):
    i = tk.index()
    word_idx = i // 32
    bit_idx = i % 32
    for c in range(a.shape[1]):
        bit_mask = tk.uint32(1) << tk.uint32(bit_idx)
        if op_type == 3:
            tk.atomic_and(a, (word_idx, c), (b[word_idx, c] & bit_mask) | ~bit_mask)
        elif op_type == 4:
            tk.atomic_or(a, (word_idx, c), b[word_idx, c] & bit_mask)
        else:
            tk.atomic_xor(a, (word_idx, c), b[word_idx, c] & bit_mask)


@pytest.fixture(params=backend_params('CPU', 'INTERP', 'INTERP:CHECK', 'CL', 'WEBGPU', 'CUDA'), scope="module")
def anybe(request):
    return tk.backend(request.param)


@pytest.mark.parametrize("width", [1, 3, 9], ids=["scalar", "vec3ui", "mat33ui"])
def test_atomic_bitwise(anybe, width):
    """test_atomic_bitwise_scalar/_vector/_matrix, the atomic op types 3-5: 32 items per word,
    each carrying one bit of b into a, give a & b, a | b and a ^ b"""
    n = 64 if width == 1 else 16
    rng = np.random.default_rng(42)
    a = rng.integers(0, np.iinfo(np.uint32).max, size=(n, width), dtype=np.uint32)
    b = rng.integers(0, np.iinfo(np.uint32).max, size=(n, width), dtype=np.uint32)
    for op, want in ((3, a & b), (4, a | b), (5, a ^ b)):
        da = put(anybe, a.copy())
        atomic_bitwise(anybe)(da, put(anybe, b), op, ndrange=n * 32)
        tk.synchronize(anybe)
        np.testing.assert_array_equal(get(da), want)


@tk.kernel
def plain_bitwise(a, b: tk.Const, op_type):
    i = tk.index()
    word_idx = i // 32
    bit_idx = i % 32
    bit_mask = tk.uint32(1) << tk.uint32(bit_idx)
    if op_type == 0:
        a[word_idx] &= (b[word_idx] & bit_mask) | ~bit_mask
    elif op_type == 1:
        a[word_idx] |= b[word_idx] & bit_mask
    else:
        a[word_idx] ^= b[word_idx] & bit_mask


@pytest.mark.parametrize("op", [0, 1, 2], ids=["and", "or", "xor"])
def test_augmented_assignment_on_a_shared_word_is_a_data_race(op):
    """upstream's op types 0-2 (``a[i] &= v``, atomic in Warp): plain read-modify-writes here,
    reported by check mode as a race between two work items on element 0"""
    be = tk.Interpreter(check=True)
    a = np.full(2, 0xFFFF0000, np.uint32)
    b = np.full(2, 0x0F0F0F0F, np.uint32)
    with pytest.raises(tk.KernelCheckError, match=r"data race on array 'a' element 0"):
        plain_bitwise(be)(a, b, op, ndrange=64)
