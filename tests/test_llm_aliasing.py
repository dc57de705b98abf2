"""tinykernels.llm: an ``out`` that overlaps an input is either the same view (in place,
elementwise) or refused with a ValueError naming both arguments; never a silent race."""
import numpy as np
import pytest

from tinykernels import llm

rng = np.random.default_rng(11)


def test_partly_overlapping_out_is_refused():
    z = np.arange(1, 1002, dtype=np.float32)
    y = np.ones(1000, np.float32)
    before = z.copy()
    with pytest.raises(ValueError, match=r"llm\.add: argument 'out': .*got one that overlaps argument 'b'"):
        llm.add(y, z[:1000], out=z[1:1001])
    with pytest.raises(ValueError, match=r"llm\.exp: argument 'out': .*got one that overlaps argument 'x'"):
        llm.exp(z[:1000], out=z[1:1001])
    with pytest.raises(ValueError, match=r"llm\.add: argument 'out': .*got one that overlaps argument 'a'"):
        llm.add(z[:1000].reshape(10, 100), z[:100], out=z[1:1001].reshape(10, 100))
    np.testing.assert_array_equal(z, before)          # refused before anything ran


def test_same_view_in_place_and_disjoint_interleaved_views_work():
    x = rng.standard_normal(4096).astype(np.float32)
    y = rng.standard_normal(4096).astype(np.float32)
    want = x + y
    llm.add(x, y, out=x)                             # the same view: in place
    np.testing.assert_array_equal(x, want)
    z = rng.standard_normal(2000).astype(np.float32)
    ev, od = z[::2].copy(), z[1::2].copy()
    llm.mul(z[1::2], 3.0, out=z[::2])                # shares the buffer, no element in common
    np.testing.assert_array_equal(z[::2], od * np.float32(3.0))
    np.testing.assert_array_equal(z[1::2], od)
    assert not np.array_equal(ev, z[::2])
    r = rng.standard_normal((8, 64)).astype(np.float32)
    w = rng.standard_normal(64).astype(np.float32)
    want = llm.rms_norm(r.copy(), w)
    llm.rms_norm(r, w, out=r)                        # row-wise: in place is fine
    np.testing.assert_array_equal(r, want)


def test_outputs_that_other_work_items_read_are_refused():
    a = rng.standard_normal((64, 64)).astype(np.float32)
    with pytest.raises(ValueError, match=r"llm\.transpose: argument 'out': .*got one that shares memory with argument 'x'"):
        llm.transpose(a, out=a)
    t = rng.standard_normal((16, 8)).astype(np.float32)
    with pytest.raises(ValueError, match=r"llm\.gather: argument 'out': .*got one that shares memory with argument 'table'"):
        llm.gather(t, np.arange(16, dtype=np.int32)[::-1].copy(), out=t)
    m = rng.standard_normal((32, 32)).astype(np.float32)
    with pytest.raises(ValueError, match=r"llm\.matmul: argument 'out': .*got one that shares memory with argument 'b'"):
        llm.matmul(m.copy(), m, out=m)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    w = np.ones(16, np.float32)
    with pytest.raises(ValueError, match=r"llm\.rms_norm: argument 'out': .*got one that shares memory with argument 'w'"):
        llm.rms_norm(x[:1].reshape(16), w, out=w)


def test_torch_views_are_checked_too():
    torch = pytest.importorskip("torch")
    z = torch.arange(1, 1002, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"llm\.exp: argument 'out': .*got one that overlaps argument 'x'"):
        llm.exp(z[:1000], out=z[1:1001])
    x = torch.linspace(-1, 1, 100)
    want = torch.exp(x)
    llm.exp(x, out=x)
    torch.testing.assert_close(x, want)
