"""``llm.load_gguf``: the tensors of a GGUF file (llama.cpp's model format).

GGUF stores a tensor's dimensions fastest-first (``ne[0]`` is the row length); the arrays
returned here have NumPy's row-major shapes (reversed), so a ``[n_out, n_in]`` weight reads
back as ``(n_out, n_in)``. Tensors are memory-mapped: q4_0/q8_0/q4_k weights become
``QTensor`` views of the file's bytes, plain float and integer tensors NumPy views, both
without copying (``backend=`` a device backend copies them there).
"""
from __future__ import annotations

import os

import numpy as np

from .. import array as _arr
from . import _common as C
from .quant import QTYPES, QTensor

__all__ = ["load_gguf"]

_BY_GGML = {f.ggml_type: f.name for f in QTYPES.values()}


def _import_gguf():
    try:
        import gguf
    except ImportError as e:
        raise ImportError("llm.load_gguf needs the 'gguf' package: pip install 'tinykernels[gguf]' "
                          "(or pip install gguf)") from e
    return gguf


class UnsupportedTensorType(ValueError, NotImplementedError):
    """A GGUF tensor of a type neither tinykernels nor ``gguf.quants`` decodes (Q8_1, Q8_K:
    llama.cpp's activation formats, which model files do not hold). Both a ``ValueError``
    (the file's content) and the ``NotImplementedError`` gguf raises for it."""


def _tensor(t, gguf, backend):
    """One ``ReaderTensor`` as a QTensor or a NumPy array (shape in NumPy order)."""
    ggml = int(t.tensor_type)
    dims = tuple(int(n) for n in reversed(t.shape.tolist()))     # NumPy order: last = ne[0]
    if ggml in _BY_GGML:
        fmt = QTYPES[_BY_GGML[ggml]]
        k = dims[-1]
        m = int(np.prod(dims[:-1], dtype=np.int64)) if len(dims) > 1 else 1
        data = t.data.reshape(m, k // fmt.block * fmt.block_bytes)
        if backend is not None and not backend.is_host:
            data = _arr.asarray(np.ascontiguousarray(data), backend=backend)
        return QTensor(fmt.name, (m, k), data)
    if t.data.dtype == np.uint8:            # the reader's view of every block format
        # another block format (q6_k, bf16, ...): decoded to float32 by gguf (a copy)
        try:
            arr = gguf.quants.dequantize(t.data, t.tensor_type).reshape(dims)
        except NotImplementedError as e:
            raise UnsupportedTensorType(
                f"llm.load_gguf: tensor {t.name!r} has type {t.tensor_type.name}, which neither "
                f"tinykernels (q4_0, q8_0, q4_k) nor gguf.quants ({e}) can decode") from e
    else:
        arr = t.data.reshape(dims)
    if backend is not None and not backend.is_host:
        arr = _arr.asarray(np.ascontiguousarray(arr), backend=backend)
    return arr


def load_gguf(path, backend=None) -> dict:
    """The tensors of the GGUF file at ``path``: ``{name: QTensor or array}``.

    q4_0, q8_0 and q4_k tensors become ``QTensor`` ([rows, row length]; tensors of more than
    two dimensions have their leading dimensions flattened into rows) over the memory-mapped
    file; float32/float16/integer tensors are memory-mapped NumPy arrays; other block formats
    (q6_k, bf16, ...) are decoded to float32 NumPy arrays by ``gguf.quants``. With ``backend``
    a device backend (``"CL"``, ``tk.CUDA()``...) every tensor is copied to it."""
    gguf, reader = open_reader(path, "load_gguf")
    if isinstance(backend, str):
        from ..backends import backend as _make
        backend = _make(backend)
    return {t.name: _tensor(t, gguf, backend) for t in reader.tensors}


def open_reader(path, fn: str) -> tuple:
    """``(gguf module, GGUFReader)`` of the file at ``path``; a missing file or one gguf
    cannot parse is a ``ValueError`` naming ``fn``'s argument ``path``."""
    gguf = _import_gguf()
    C.require(isinstance(path, (str, os.PathLike)), fn, "path", f"expected a file path, got {type(path).__name__}")
    C.require(os.path.isfile(path), fn, "path", f"no such file: {os.fspath(path)!r}")
    try:
        return gguf, gguf.GGUFReader(os.fspath(path), "r")
    except (ValueError, OSError) as e:
        raise ValueError(f"llm.{fn}: argument 'path': {os.fspath(path)!r} is not a readable "
                         f"GGUF file ({e})") from e
