"""SPEC section 10 read once more (engineer llm20): the reductions of integer and bool arrays
(``llm.argmax``: "argmax of a 1-D array: int32 0-d array, first index on ties", with no
dtype restriction; ``llm.sum`` as NumPy sums them), the fastmath route of the WebGPU kernels
(the WGSL ``fma`` builtin only where a kernel allows contraction), and llama.cpp
test-backend-ops cases not yet ported (``tests/test-backend-ops.cpp``). References are NumPy
(integer results exactly) or float64."""
import numpy as np
import pytest

import tinykernels as tk
from tinykernels import llm
from tinykernels.llm import layout

from llm_helpers import backends, dev, get

try:
    import torch
except ImportError:                       # the minimal install: those tests skip
    torch = None

INTS = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
GPU_INTS = ("bool", "int8", "uint16", "int32", "uint32", "int64", "uint64")


def on(a, b):
    return a if b.name == "CPU" else tk.asarray(np.ascontiguousarray(a), backend=b)


def ints(dt, n, rng):
    """``n`` values of dtype ``dt`` over its whole range (0/1 for bool)."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(dt)
    i = np.iinfo(dt)
    return rng.integers(i.min, i.max, n, dtype=dt, endpoint=True)


# --- reductions of integer and bool arrays ---------------------------------------------------

@pytest.mark.parametrize("name", backends())
def test_argmax_of_integer_and_bool_arrays_is_numpys(name):
    """Every integer dtype and bool the backend holds (WebGPU: no 64-bit ones): NumPy's
    first index of the maximum, on ties, when every element is the type's smallest value
    (the running maximum's start), at the last index, and where the 64-bit values differ
    only past float32's and float64's precision. Until llm20 all of them were refused."""
    b = dev(name)
    rng = np.random.default_rng(20)
    n = 300 if name == "INTERP" else 1000
    for dt in INTS if name in ("CPU", "INTERP") else GPU_INTS:      # (each dtype a compile: CI time)
        if not b.supports(dt):
            continue
        x = ints(dt, n, rng)
        x[[7, n // 2]] = x.max()                  # a tie: the first one
        lo = np.zeros(37, dt) if dt == "bool" else np.full(37, np.iinfo(dt).min, dt)
        last = lo.copy()
        last[-1] = 1
        cases = [x, lo, last, x[::-1].copy(), x[:5].copy()]
        if dt in ("int64", "uint64"):
            big = np.array([2**53 + 1, 2**62, 2**62 + 1, 2**62 + 1, 3], dt)    # one float64 apart: none
            cases.append(big)
        for c in cases:
            g = get(llm.argmax(on(c, b)))
            assert g.shape == () and g.dtype == np.int32 and int(g) == int(np.argmax(c)), (dt, c[:8])


def test_argmax_of_a_long_integer_array_combines_chunks_in_order():
    """More than ``layout.ARGMAX_CHUNK`` elements on the CPU: one work item per chunk, then
    the chunks combined; the maximum tied across chunks gives the first chunk's index."""
    n = layout.ARGMAX_CHUNK * 2 + 123
    x = np.arange(n, dtype=np.int64) % 1000 - 500
    x[[layout.ARGMAX_CHUNK + 5, 2 * layout.ARGMAX_CHUNK + 7]] = 2**40
    assert int(llm.argmax(x)) == layout.ARGMAX_CHUNK + 5
    u = (np.arange(n) % 251).astype(np.uint8)
    assert int(llm.argmax(u)) == int(np.argmax(u)) == 250


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_argmax_and_sum_of_integer_torch_tensors():
    """CPU torch tensors of integer and bool dtypes, as NumPy arrays."""
    rng = np.random.default_rng(3)
    for dt in ("bool", "int8", "uint8", "int16", "int32", "int64"):
        x = ints(dt, 50, rng)
        assert int(llm.argmax(torch.from_numpy(x))) == int(np.argmax(x))
        s = llm.sum(torch.from_numpy(x.reshape(5, 10)), 1)
        np.testing.assert_array_equal(s.numpy(), x.reshape(5, 10).sum(1))
        assert s.numpy().dtype == x.sum().dtype


@pytest.mark.parametrize("name", backends())
def test_sum_of_integer_and_bool_arrays_is_numpys(name):
    """``llm.sum`` of integers and bool has NumPy's dtype (int64 for bool and signed
    integers, uint64 for unsigned ones) and value, wrapping modulo 2**64 as NumPy's does
    (int64 values over their whole range); on every axis. A backend without 64-bit integers
    (WebGPU) refuses them with a ValueError naming ``x`` and the dtype NumPy sums to."""
    b = dev(name)
    rng = np.random.default_rng(21)
    shape = (3, 5, 7) if name == "INTERP" else (4, 33, 9)
    for i, dt in enumerate(INTS if name in ("CPU", "INTERP") else GPU_INTS):
        if not b.supports(dt):
            continue
        x = ints(dt, int(np.prod(shape)), rng).reshape(shape)
        if not b.supports("int64"):
            with pytest.raises(ValueError, match=rf"llm.sum: argument 'x': .*NumPy sums dtype {dt} to u?int64"):
                llm.sum(on(x, b), 0)
            continue
        ax = i % 3                                # (every axis, not for every dtype: each a compile)
        want = x.sum(ax)
        g = get(llm.sum(on(x, b), ax))
        assert g.dtype == want.dtype, (dt, ax)
        np.testing.assert_array_equal(g, want, err_msg=f"{dt} axis {ax}")


def test_sum_of_integers_writes_a_given_out_of_numpys_dtype():
    x = np.arange(24, dtype=np.int16).reshape(4, 6)
    out = np.zeros(4, np.int64)
    assert llm.sum(x, 1, out=out) is out
    np.testing.assert_array_equal(out, x.sum(1))
    with pytest.raises(ValueError, match="llm.sum: argument 'out': expected dtype int64, got dtype int16"):
        llm.sum(x, 1, out=np.zeros(4, np.int16))


def test_reductions_refuse_other_dtypes_naming_x():
    for f, fn in ((lambda a: llm.argmax(a), "argmax"), (lambda a: llm.sum(a, 0), "sum")):
        with pytest.raises(ValueError, match=rf"llm.{fn}: argument 'x': expected dtype .*int64 or uint64, "
                                             r"got dtype complex64"):
            f(np.ones(4, np.complex64))


# --- WebGPU: tk.fma in fastmath kernels, and the llm kernels that may use it ------------------

needs_webgpu = pytest.mark.skipif("WEBGPU" not in tk.backends_available(), reason="WEBGPU unavailable")


@pytest.fixture(scope="module")
def fma_kernels(tmp_path_factory):
    from gen_kernels import make_kernel
    d = str(tmp_path_factory.mktemp("fma20"))
    body = ["out[i] = tk.fma(a[i], b[i], c[i])"]
    return (make_kernel(d, "fma_exact20", ("out", "a", "b", "c"), body),
            make_kernel(d, "fma_fast20", ("out", "a", "b", "c"), body, fastmath=True))


@needs_webgpu
def test_webgpu_fma_is_the_builtin_in_fastmath_kernels_only(fma_kernels):
    """A default kernel's ``tk.fma`` stays correctly rounded on WebGPU (the emulation: exact
    against float64, which holds a float32 product exactly, for inputs where the builtin of
    lavapipe rounds the product first); a ``fastmath`` kernel's is the WGSL builtin (one
    instruction): the exact result or the product rounded first, nothing else."""
    b = dev("WEBGPU")
    rng = np.random.default_rng(22)
    a = np.concatenate([[1 + 2**-12, 3.0], rng.standard_normal(254)]).astype(np.float32)
    bb = np.concatenate([[1 + 2**-12, 3.0], rng.standard_normal(254)]).astype(np.float32)
    c = np.concatenate([[-(1 + 2**-11), 1.0], rng.standard_normal(254)]).astype(np.float32)
    exact = (a.astype(np.float64) * bb + c).astype(np.float32)       # (one rounding: a b is exact in f64,
    twice = (a * bb) + c                                             #  then + c: 2**-24 on the first one)
    assert exact[0] == 2.0**-24 and twice[0] == 0
    args = [tk.asarray(x, backend=b) for x in (a, bb, c)]
    k_exact, k_fast = fma_kernels
    for k in fma_kernels:
        src = k.source(b, tk.zeros(256, np.float32, backend=b), *args, ndrange=256)
        assert ("tk_fma(" in src) == (k is k_exact) and (" fma(" in src) == (k is k_fast), k.name
    o = tk.zeros(256, np.float32, backend=b)
    k_exact(b)(o, *args, ndrange=256)
    np.testing.assert_array_equal(o.numpy(), exact)
    k_fast(b)(o, *args, ndrange=256)
    got = o.numpy()
    assert np.all((got == exact) | (got == twice)), np.flatnonzero((got != exact) & (got != twice))[:5]


def _decode_ref(q, kc, vc, n):
    g = q.shape[1] // kc.shape[1]
    k, v = (np.repeat(x[:, :, :n].astype(np.float64), g, 1) for x in (kc, vc))
    s = np.einsum("bhd,bhld->bhl", q.astype(np.float64), k) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhl,bhld->bhd", p / p.sum(-1, keepdims=True), v)


@needs_webgpu
def test_flash_decode_on_webgpu_contracts_and_the_exact_route_remains(monkeypatch):
    """``flash_decode``'s kernel (its dot products and ``p @ V`` are ``tk.fma``) runs as its
    ``fastmath`` twin on WebGPU (``_common.contracted``: the WGSL builtin), everywhere else as
    itself; with ``CONTRACT_BACKENDS`` empty WebGPU runs the exact kernel. Both routes match
    float64 within the head dim's float32 tolerance."""
    from tinykernels.llm import _common as C
    from tinykernels.llm import attention
    b = dev("WEBGPU")
    assert C.contracted(attention._fd_part, tk.CPU()) is attention._fd_part
    twin = C.contracted(attention._fd_part, b)
    assert twin.fastmath and twin is C.contracted(attention._fd_part, b) and not attention._fd_part.fastmath
    rng = np.random.default_rng(23)
    B, H, KH, L, D = 1, 4, 2, 40, 64
    q = rng.standard_normal((B, H, D)).astype(np.float32)
    kc, vc = (rng.standard_normal((B, KH, L, D)).astype(np.float32) for _ in range(2))
    want = _decode_ref(q, kc, vc, 33)
    tol = 8 * D * float(np.finfo(np.float32).eps)
    args = [tk.asarray(x, backend=b) for x in (q, kc, vc)]
    seen = []
    launch = C.launch
    monkeypatch.setattr(C, "launch", lambda k, *a, **kw: (seen.append(k), launch(k, *a, **kw))[1])
    fast = get(llm.flash_decode(*args, 33))
    monkeypatch.setattr(C, "CONTRACT_BACKENDS", frozenset())
    exact = get(llm.flash_decode(*args, 33))
    assert seen[0] is twin and seen[-1] is attention._fd_part
    np.testing.assert_allclose(fast, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(exact, want, rtol=tol, atol=tol)
