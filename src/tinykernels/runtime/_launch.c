/* The launch fast path of the CPU backend, as a small CPython extension.
 *
 * An array argument may be a NumPy array, a host tk.Array (register_host_array: its NumPy
 * array) or a plain CPU torch tensor of a dtype registered by register_torch (read through
 * is_cpu, layout, dtype, is_neg(), shape, stride() and data_ptr(): no NumPy view, no DLPack);
 * each argument is gathered once per call (tk_arg) and the key, the checks and the packing
 * read that record. A tensor's key is its NumPy view's key, so both share specializations.
 *
 * sig(cmask, args, geom, ndim, wg, ranges) -> bytes | None
 *     The specialization key of a launch: per argument a code (array dtype, ndim and
 *     layout; scalar kind; constexpr type and exact value, constexpr_code), then the ndrange rank, whether every
 *     extent fits in 32 bits, the launch workgroup size and whether ranges are used.
 *     None when an argument is not something this module understands.
 * run(fnptr, nthreads, cmask, args, geom)
 *     Pack the argument slots and call the kernel's entry point.
 * fast(plans, cmask, nthreads, args, ndrange, wg) -> True | key | None
 *     Both in one call (an int, or a tuple of ints and ranges, as ndrange): look the key up
 *     in ``plans`` (key -> entry point address) and launch; on a miss return the key.
 *     A plan may instead be bytes, int64 words (runtime/launchcheck.py, fast_plan):
 *     fnptr, npairs, (i, j)*, nfacts, (arg, dim, kind | pad << 3, axis, offset)*: argument pairs
 *     that must not share memory (byte spans) and accesses whose work-item coordinate
 *     range must stay inside an array dimension. When one fails, fast() returns the key
 *     as on a miss, and the Python slow path raises the error.
 * prepare(plans, cmask, args, ndrange, wg) -> (entry,) | key | None
 *     fast() without the call: its key lookup and checks now, the slots packed now, as a
 *     raw() entry (no patches, no pairs) for a launch that runs later (a stream's job).
 * template(cmask, args, ndrange) -> (slots bytes, first slot per argument) | None
 *     The packed slots of a launch (as fast() would pass them) and, per argument, the index
 *     of its first slot (-1 for a constexpr), for callers that keep a launch's slots and
 *     patch only what changes per call (see raw()). None when fast() would not take it.
 * raw(entry, nthreads, vals) -> bool
 *     Launch from a kept template: ``entry`` is int64 words ``fnptr, nslots, slot*, npatch,
 *     (val, slot, kind, align)*, npairs, (val_i, lo_i, hi_i, val_j, lo_j, hi_j)*``; each
 *     patch writes ``vals[val]`` into a slot (kind 0: a data pointer, an int that must be a
 *     multiple of ``align``; 1: float; 2: int64 (or uint64); 3: bool), and each pair of data
 *     pointers must not share bytes ([ptr + lo, ptr + hi), empty when lo == hi). False,
 *     without launching, when a value does not fit or a check fails (the caller then takes
 *     the checked path, which raises).
 *
 * register_host_array(type), register_torch(types, strided, dtype, typenum, itemsize)
 *     The argument kinds besides NumPy arrays (see above); runtime/launcher.py registers them.
 *
 * dlpack_deleter, dlpack_deleter_v, register_dl_release: C deleters of exported DLPack tensors
 *     (valid after Python has finalized, when a consumer such as XLA may call them) and the
 *     Python release they call while the interpreter runs
 * dlpack_capsule_dtor: the address of a PyCapsule destructor for DLPack capsules
 *     (runtime/dlpack.py): an unconsumed "dltensor" / "dltensor_versioned" capsule calls its
 *     tensor's deleter, with the interpreter's error state saved and restored around it (a
 *     consumer that fails, e.g. np.from_dlpack of a device tensor, drops the capsule with its
 *     error set; a destructor written in Python would run with that error set and turn it
 *     into SystemError).
 *
 * Slot layout (see codegen/c.py): 9 geometry slots (start, count, step per dimension),
 * then per array: data pointer, shape[ndim], strides in elements[ndim]; per scalar: one slot.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <numpy/arrayscalars.h>
#include <stdint.h>
#include <string.h>
#ifndef _WIN32
#include <pthread.h>
#endif

typedef union { int64_t i; double f; void *p; } tk_slot;
typedef void (*tk_entry)(const tk_slot *, int);

#define MAX_SLOTS 512
#define MAX_ARGS 64
#define RELEASE_GIL_ITEMS 32768

/* What the launcher reads of one argument, gathered once per launch (the key, the checks and
 * the packing all read it): an array's data pointer, layout and flags, whichever object holds
 * it: a NumPy array, a host tk.Array (its ``_host``) or a CPU torch tensor (see
 * register_torch); a scalar or constexpr keeps only its object. */
typedef struct {
    PyObject *o;              /* the argument */
    PyObject *own;            /* a reference held until the launch returns (a tk.Array's _host), or NULL */
    int is_array, nd, typenum, writeable, aligned, contig;
    char *data;
    npy_intp isz, size, dims[8], strides[8];   /* strides in bytes, as NumPy's */
} tk_arg;

static PyTypeObject *host_array_type = NULL;   /* tk.Array (the exact type: device arrays derive from it) */
static PyObject *host_attr = NULL;             /* "_host" */
static PyObject *torch_types = NULL;           /* tuple of exact torch tensor types (torch.Tensor, nn.Parameter) */
static PyObject *torch_strided = NULL;         /* torch.strided */
static PyObject *torch_dtypes = NULL;          /* torch dtype -> NumPy type number << 16 | item size */
static PyObject *s_is_cpu, *s_layout, *s_dtype, *s_is_neg, *s_shape, *s_stride, *s_data_ptr;

static void release(tk_arg *xs, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i) Py_CLEAR(xs[i].own);
}

/* NumPy's C-contiguity rule (_UpdateContiguousFlags): an empty array is contiguous, extents of
 * 1 are skipped; the key must say what a NumPy view of the same memory would say */
static int c_contiguous(const tk_arg *x) {
    npy_intp sd = x->isz;
    int c = 1;
    for (int d = x->nd - 1; d >= 0; --d) {
        if (x->dims[d] == 0) return 1;
        if (x->dims[d] != 1) {
            if (x->strides[d] != sd) c = 0;
            sd *= x->dims[d];
        }
    }
    return c;
}

static int fill_numpy(PyArrayObject *a, tk_arg *x) {
    int nd = PyArray_NDIM(a);
    if (nd > 8 || PyArray_DESCR(a)->byteorder == '>') return -1;
    x->is_array = 1;
    x->nd = nd;
    x->typenum = PyArray_TYPE(a);
    x->isz = PyArray_ITEMSIZE(a);
    x->size = PyArray_SIZE(a);
    x->data = PyArray_BYTES(a);
    x->writeable = PyArray_ISWRITEABLE(a) ? 1 : 0;
    x->aligned = PyArray_ISALIGNED(a) ? 1 : 0;
    x->contig = PyArray_IS_C_CONTIGUOUS(a) ? 1 : 0;
    for (int d = 0; d < nd; ++d) { x->dims[d] = PyArray_DIMS(a)[d]; x->strides[d] = PyArray_STRIDES(a)[d]; }
    return 1;
}

/* a CPU torch tensor read through its own accessors (no NumPy view, no DLPack): only what the
 * checked path already turned into a NumPy view of the same dtype (register_torch), on the
 * CPU, strided, not a lazily negated view, with a data pointer; -1 (no exception) otherwise */
static int fill_torch(PyObject *o, tk_arg *x) {
    int ok = -1;
    PyObject *cpu = NULL, *layout = NULL, *dt = NULL, *neg = NULL, *shape = NULL, *stride = NULL, *ptr = NULL;
    long long code;
    cpu = PyObject_GetAttr(o, s_is_cpu);
    if (cpu != Py_True) goto out;
    layout = PyObject_GetAttr(o, s_layout);
    if (layout != torch_strided) goto out;
    dt = PyObject_GetAttr(o, s_dtype);
    PyObject *c = dt ? PyDict_GetItemWithError(torch_dtypes, dt) : NULL;
    if (!c || (code = PyLong_AsLongLong(c)) < 0) goto out;
    neg = PyObject_CallMethodNoArgs(o, s_is_neg);
    if (neg != Py_False) goto out;
    shape = PyObject_GetAttr(o, s_shape);
    stride = PyObject_CallMethodNoArgs(o, s_stride);
    if (!shape || !stride || !PyTuple_Check(shape) || !PyTuple_Check(stride)) goto out;
    Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    if (nd > 8 || PyTuple_GET_SIZE(stride) != nd) goto out;
    x->isz = (npy_intp)(code & 0xffff);
    x->typenum = (int)(code >> 16);
    x->size = 1;
    for (Py_ssize_t d = 0; d < nd; ++d) {
        long long n = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
        long long st = PyLong_AsLongLong(PyTuple_GET_ITEM(stride, d));
        if (PyErr_Occurred() || n < 0 || st < 0) goto out;
        x->dims[d] = (npy_intp)n;
        x->strides[d] = (npy_intp)st * x->isz;
        x->size *= (npy_intp)n;
    }
    ptr = PyObject_CallMethodNoArgs(o, s_data_ptr);   /* raises for tensors without storage */
    if (!ptr) goto out;
    x->data = (char *)PyLong_AsVoidPtr(ptr);
    if (!x->data || PyErr_Occurred()) goto out;      /* 0: an empty tensor, a ZeroTensor */
    x->is_array = 1;
    x->nd = (int)nd;
    x->writeable = 1;                                /* tensor.numpy() is always writeable */
    x->aligned = x->isz > 0 && (uintptr_t)x->data % (uintptr_t)x->isz == 0;
    x->contig = c_contiguous(x);
    ok = 1;
out:
    Py_XDECREF(cpu); Py_XDECREF(layout); Py_XDECREF(dt); Py_XDECREF(neg);
    Py_XDECREF(shape); Py_XDECREF(stride); Py_XDECREF(ptr);
    if (ok < 0) { PyErr_Clear(); x->is_array = 0; }
    return ok;
}

/* gather argument ``o``: 1 an array, 0 a scalar or constexpr (arg_code decides), -1 an array
 * this module does not read (no exception set; the caller takes the checked path) */
static int gather(PyObject *o, int is_constexpr, tk_arg *x) {
    x->o = o;
    x->own = NULL;
    x->is_array = 0;
    if (is_constexpr) return 0;
    if (PyArray_Check(o)) return fill_numpy((PyArrayObject *)o, x);
    if (host_array_type && Py_TYPE(o) == host_array_type) {
        PyObject *h = PyObject_GetAttr(o, host_attr);
        if (!h || !PyArray_Check(h)) { Py_XDECREF(h); PyErr_Clear(); return -1; }
        x->own = h;                        /* the array stays alive while the kernel runs */
        return fill_numpy((PyArrayObject *)h, x);
    }
    if (torch_types) {
        Py_ssize_t nt = PyTuple_GET_SIZE(torch_types);
        for (Py_ssize_t i = 0; i < nt; ++i)
            if ((PyObject *)Py_TYPE(o) == PyTuple_GET_ITEM(torch_types, i)) return fill_torch(o, x);
    }
    return 0;
}

/* every argument of ``args`` into ``xs``; -1 (references released, no exception) when one is
 * not understood */
static int gather_all(uint64_t cmask, PyObject *args, tk_arg *xs) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n > MAX_ARGS) return -1;
    for (Py_ssize_t i = 0; i < n; ++i) {
        if (gather(PyTuple_GET_ITEM(args, i), (int)((cmask >> i) & 1), &xs[i]) < 0) {
            release(xs, i + 1);
            return -1;
        }
    }
    return 0;
}

/* A constexpr's value for the key (its type goes beside it): the value itself, never its hash
 * alone (hash(-1) == hash(-2), hash(0.0) == hash(-0.0), hash(2**61 - 1) == hash(0): a key
 * of hashes reused one value's build for another). 'C' | 0: *v is the value's 64 bits (a
 * bool, an int in [-2**63, 2**64), a float's bits, a NumPy scalar's bytes (<= 8), a
 * fixed-size dtype's type number and byte order); 'C' | 1: *v is the hash of an object without such bits (a
 * type: its identity; others: the key compares them by hash, as before); 0: unhashable. */
static uint32_t constexpr_code(PyObject *o, uint64_t *v) {
    *v = 0;
    if (PyBool_Check(o)) { *v = (o == Py_True); return 0x43000000u; }
    if (PyFloat_CheckExact(o)) { double d = PyFloat_AS_DOUBLE(o); memcpy(v, &d, 8); return 0x43000000u; }
    if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (!overflow) { *v = (uint64_t)x; return 0x43000000u; }
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(o);
            if (!PyErr_Occurred()) { *v = (uint64_t)u; return 0x43000002u; }   /* [2**63, 2**64) */
            PyErr_Clear();
        }
    } else if (PyArray_IsScalar(o, Generic)) {
        PyArray_Descr *d = PyArray_DescrFromScalar(o);
        if (!d) { PyErr_Clear(); return 0; }
        int tn = d->type_num;
        Py_DECREF(d);
        if (tn <= NPY_DOUBLE || tn == NPY_HALF) { PyArray_ScalarAsCtype(o, v); return 0x43000000u; }  /* <= 8 bytes */
    } else if (PyArray_DescrCheck(o)) {
        PyArray_Descr *d = (PyArray_Descr *)o;   /* a fixed-size type: its number and byte order say it all */
        int tn = d->type_num;
        if (tn <= NPY_DOUBLE || tn == NPY_HALF || tn >= NPY_USERDEF) {
            *v = (uint64_t)(uint32_t)tn | ((uint64_t)(unsigned char)d->byteorder << 56);
            return 0x43000000u;
        }
    }
    Py_hash_t h = PyObject_Hash(o);
    if (h == -1) { PyErr_Clear(); return 0; }
    *v = (uint64_t)h;
    return 0x43000001u;
}

/* one 32-bit code per argument; 0 means "not understood" */
static uint32_t arg_code(const tk_arg *x, int is_constexpr, uint64_t *extra, int *fits32) {
    PyObject *o = x->o;
    if (is_constexpr) {      /* its type (extra[0]) and its exact value (extra[1]) */
        extra[0] = (uint64_t)(uintptr_t)Py_TYPE(o);
        return constexpr_code(o, &extra[1]);
    }
    if (x->is_array) {
        int nd = x->nd, tn = x->typenum, contig = x->contig;
        npy_intp isz = x->isz, n = x->size;
        if (!x->aligned) return 0;
        if (!contig) {
            for (int d = 0; d < nd; ++d) if (x->strides[d] % isz) return 0;
        }
        if (n >= ((npy_intp)1 << 31)) *fits32 = 0;
        uint32_t overlap = 0;  /* 4: elements share memory (a stride 0 along an extent > 1) */
        if (!contig) {  /* the furthest element reachable must fit too */
            npy_intp span = 0;
            for (int d = 0; d < nd; ++d) {
                npy_intp s = x->strides[d] / isz;
                span += (s < 0 ? -s : s) * (x->dims[d] > 0 ? x->dims[d] - 1 : 0);
                if (s == 0 && x->dims[d] > 1 && n > 0) overlap = 4;
            }
            if (span >= ((npy_intp)1 << 31)) *fits32 = 0;
        }
        return 0x41000000u | ((uint32_t)(tn & 0xff) << 8) | ((uint32_t)nd << 4) | (uint32_t)contig
               | (x->writeable ? 0 : 2) | overlap;
    }
    if (PyBool_Check(o)) return 0x62000000u;
    if (PyFloat_CheckExact(o)) return 0x66000000u;
    if (PyLong_CheckExact(o)) {
        int overflow = 0;
        PyLong_AsLongLongAndOverflow(o, &overflow);
        if (!overflow) return 0x69000000u;                 /* 'i': fits int64 */
        if (overflow > 0) {
            PyLong_AsUnsignedLongLong(o);
            if (!PyErr_Occurred()) return 0x4a000000u;     /* 'J': a Python int in [2**63, 2**64) */
            PyErr_Clear();
        }
        return 0;
    }
    if (PyArray_IsScalar(o, Generic)) {
        PyArray_Descr *d = PyArray_DescrFromScalar(o);
        int tn = d->type_num;
        Py_DECREF(d);
        if (tn > NPY_DOUBLE && tn != NPY_HALF) return 0;
        return 0x53000000u | ((uint32_t)tn << 8);
    }
    return 0;
}

/* one ndrange dimension from an int or a range; -1 if it needs the slow path */
static int parse_dim(PyObject *x, tk_slot *g, int *ranges) {
    if (PyLong_CheckExact(x)) {
        long long v = PyLong_AsLongLong(x);
        if (v <= 0) { PyErr_Clear(); return -1; }
        g[1].i = v;
        return 0;
    }
    if (!PyRange_Check(x)) return -1;
    long long r[3];
    static const char *names[3] = {"start", "stop", "step"};
    for (int k = 0; k < 3; ++k) {
        PyObject *v = PyObject_GetAttrString(x, names[k]);
        if (!v) { PyErr_Clear(); return -1; }
        r[k] = PyLong_AsLongLong(v);
        Py_DECREF(v);
        if (r[k] == -1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
    }
    long long start = r[0], stop = r[1], step = r[2], count;
    if (step > 0) count = stop > start ? (stop - start + step - 1) / step : 0;
    else count = start > stop ? (start - stop - step - 1) / (-step) : 0;
    if (count <= 0) return -1;
    g[0].i = start; g[1].i = count; g[2].i = step;
    int kind = step != 1 ? 2 : (start != 0 ? 1 : 0);
    if (kind > *ranges) *ranges = kind;
    return 0;
}

/* geometry from an int or a tuple of ints/ranges; -1 if it needs the slow path */
static int parse_ndrange(PyObject *nd, tk_slot *g, int *ndim, int *ranges) {
    for (int d = 0; d < 3; ++d) { g[3 * d].i = 0; g[3 * d + 1].i = 1; g[3 * d + 2].i = 1; }
    *ranges = 0;
    if (!PyTuple_CheckExact(nd)) {
        *ndim = 1;
        return parse_dim(nd, g, ranges);
    }
    Py_ssize_t n = PyTuple_GET_SIZE(nd);
    if (n < 1 || n > 3) return -1;
    for (Py_ssize_t d = 0; d < n; ++d)
        if (parse_dim(PyTuple_GET_ITEM(nd, d), g + 3 * d, ranges) < 0) return -1;
    *ndim = (int)n;
    return 0;
}

/* the key bytes; returns NULL (no exception) if an argument is not understood */
static PyObject *make_key(uint64_t cmask, const tk_arg *xs, Py_ssize_t n, const tk_slot *g, int ndim, long wg,
                          int ranges) {
    if (n > MAX_ARGS) return NULL;
    uint32_t buf[5 * MAX_ARGS + 4];
    int k = 0, fits32 = 1;
    for (Py_ssize_t i = 0; i < n; ++i) {
        uint64_t extra[2] = {0, 0};
        int isc = (int)((cmask >> i) & 1);
        uint32_t c = arg_code(&xs[i], isc, extra, &fits32);
        if (!c) return NULL;
        buf[k++] = c;
        if (isc) {
            memcpy(buf + k, extra, 16);
            k += 4;
        }
        /* the full type number: user dtypes (ml_dtypes' bfloat16, fp8) have numbers >= 256 */
        if ((c >> 24) == 0x41) buf[k++] = (uint32_t)xs[i].typenum;
    }
    int64_t total = g[1].i * g[4].i * g[7].i;
    if (total >= ((int64_t)1 << 31)) fits32 = 0;
    buf[k++] = (uint32_t)ndim | ((uint32_t)fits32 << 4) | ((uint32_t)ranges << 5);
    buf[k++] = (uint32_t)wg;
    return PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)k * 4);
}

/* pack slots; -1 with an exception set on failure */
static int pack(uint64_t cmask, const tk_arg *xs, Py_ssize_t n, tk_slot *s, int *used) {
    int k = 9;
    for (Py_ssize_t i = 0; i < n; ++i) {
        if ((cmask >> i) & 1) continue;
        const tk_arg *x = &xs[i];
        PyObject *o = x->o;
        if (x->is_array) {
            int nd = x->nd;
            if (k + 1 + 2 * nd > MAX_SLOTS) goto too_many;
            s[k++].p = x->data;
            for (int d = 0; d < nd; ++d) s[k++].i = x->dims[d];
            for (int d = 0; d < nd; ++d) s[k++].i = x->strides[d] / x->isz;
            continue;
        }
        if (k + 1 > MAX_SLOTS) goto too_many;
        if (PyBool_Check(o)) { s[k++].i = (o == Py_True); continue; }
        if (PyFloat_CheckExact(o)) { s[k++].f = PyFloat_AS_DOUBLE(o); continue; }
        if (PyLong_CheckExact(o)) {
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
            if (overflow > 0) {
                unsigned long long u = PyLong_AsUnsignedLongLong(o);
                if (PyErr_Occurred()) return -1;
                s[k++].i = (int64_t)u;
                continue;
            }
            if (overflow) {
                PyErr_Format(PyExc_OverflowError, "argument %zd: Python int does not fit in 64 bits", i);
                return -1;
            }
            s[k++].i = v;
            continue;
        }
        if (PyArray_IsScalar(o, Generic)) {
            PyArray_Descr *d = PyArray_DescrFromScalar(o);
            int tn = d->type_num;
            Py_DECREF(d);
            if (tn == NPY_FLOAT || tn == NPY_DOUBLE || tn == NPY_HALF) {
                double v = PyFloat_AsDouble(o);
                if (v == -1.0 && PyErr_Occurred()) return -1;
                s[k++].f = v;
            } else if (tn == NPY_ULONGLONG || tn == NPY_ULONG) {
                unsigned long long v = PyLong_AsUnsignedLongLongMask(o);
                if (PyErr_Occurred()) return -1;
                s[k++].i = (int64_t)v;
            } else {
                PyObject *as_int = PyNumber_Long(o);
                if (!as_int) return -1;
                long long v = PyLong_AsLongLong(as_int);
                Py_DECREF(as_int);
                if (v == -1 && PyErr_Occurred()) return -1;
                s[k++].i = v;
            }
            continue;
        }
        PyErr_Format(PyExc_TypeError, "argument %zd of type %s is not supported", i, Py_TYPE(o)->tp_name);
        return -1;
    }
    *used = k;
    return 0;
too_many:
    PyErr_SetString(PyExc_ValueError, "too many kernel arguments");
    return -1;
}

/* the byte span [lo, hi) an array reaches; lo == hi when it is empty */
static void byte_span(const tk_arg *a, char **lo, char **hi) {
    char *l = a->data, *h = l;
    for (int d = 0; d < a->nd; ++d) {
        npy_intp n = a->dims[d], st = a->strides[d];
        if (n == 0) { *lo = *hi = l; return; }
        if (st < 0) l += st * (n - 1); else h += st * (n - 1);
    }
    *lo = l; *hi = h + a->isz;
}

/* the launch checks of a plan's words (see the top); 1 when the launch may go ahead */
static int checks_ok(const int64_t *w, Py_ssize_t nw, const tk_arg *xs, Py_ssize_t n, const tk_slot *g) {
    Py_ssize_t k = 1;
    if (nw < 3) return 0;
    int64_t npairs = w[k++];
    if (npairs < 0 || k + 2 * npairs + 1 > nw) return 0;
    for (int64_t p = 0; p < npairs; ++p, k += 2) {
        if (w[k] < 0 || w[k] >= n || w[k + 1] < 0 || w[k + 1] >= n) return 0;
        const tk_arg *x = &xs[w[k]], *y = &xs[w[k + 1]];
        if (!x->is_array || !y->is_array) return 0;
        char *xl, *xh, *yl, *yh;
        byte_span(x, &xl, &xh);
        byte_span(y, &yl, &yh);
        if (xl < xh && yl < yh && xl < yh && yl < xh) return 0;
    }
    int64_t nfacts = w[k++];
    if (nfacts < 0 || k + 5 * nfacts > nw) return 0;
    for (int64_t f = 0; f < nfacts; ++f, k += 5) {
        int64_t i = w[k], dim = w[k + 1], kind = w[k + 2], axis = w[k + 3], off = w[k + 4];
        if (i < 0 || i >= n || axis < 0 || axis > 2) return 0;
        const tk_arg *x = &xs[i];
        if (!x->is_array || dim < 0 || dim >= x->nd) return 0;
        int64_t size = x->dims[dim], lo, hi;
        /* launchcheck.PAD_SHIFT: an unsafe_indices kernel's group size along the axis, whose
         * items past the ndrange run too (the extent is over the ndrange padded to whole groups) */
        int64_t pad = kind >> 3;
        kind &= 7;
        if (pad < 0) return 0;
        const tk_slot *ga = g + 3 * axis;
        int64_t count = pad ? (ga[1].i + pad - 1) / pad * pad : ga[1].i;
        if (kind == 0) {
            int64_t items = g[1].i * g[4].i * g[7].i;
            hi = (pad ? (items + pad - 1) / pad * pad : items) - 1;
            lo = 0;
        }
        else if (kind == 2) { lo = 0; hi = count - 1; }
        else if (kind == 3) { lo = 0; hi = 0; }            /* a constant index: the offset */
        else {
            int64_t last = ga[0].i + (count - 1) * ga[2].i;
            lo = last < ga[0].i ? last : ga[0].i;
            hi = last < ga[0].i ? ga[0].i : last;
        }
        if (lo + off < 0 || hi + off >= size) return 0;
    }
    return 1;
}

/* GCC's libgomp is not fork-safe: a thread that ran a parallel region keeps a pool of worker
 * threads, and in a child forked from it that pool's threads no longer exist, so its next
 * parallel region waits for them forever. In a child, launches from the thread that forked
 * (the only thread that survives a fork) therefore run on one thread (no OpenMP call; every
 * kernel has that path); threads started in the child get fresh pools and run in parallel.
 * PyTorch does the same for its OpenMP pool. */
#ifndef _WIN32
static int forked = 0;
static pthread_t fork_thread;
static void after_fork_child(void) { forked = 1; fork_thread = pthread_self(); }
#define FORK_SAFE(n) ((forked && pthread_equal(pthread_self(), fork_thread)) ? 1 : (n))
#else
#define FORK_SAFE(n) (n)
#endif

static void call(tk_entry fn, const tk_slot *s, int nthreads) {
    nthreads = FORK_SAFE(nthreads);
    int64_t total = s[1].i * s[4].i * s[7].i;
    if (total >= RELEASE_GIL_ITEMS || nthreads > 1) {
        Py_BEGIN_ALLOW_THREADS
        fn(s, nthreads);
        Py_END_ALLOW_THREADS
    } else {
        fn(s, nthreads);
    }
}

static int geom_from_tuple(PyObject *geom, tk_slot *g) {
    if (PyTuple_GET_SIZE(geom) != 9) { PyErr_SetString(PyExc_ValueError, "geom must have 9 ints"); return -1; }
    for (int i = 0; i < 9; ++i) {
        g[i].i = PyLong_AsLongLong(PyTuple_GET_ITEM(geom, i));
        if (g[i].i == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

static PyObject *py_sig(PyObject *self, PyObject *a) {
    unsigned long long cmask; PyObject *args, *geom; int ndim, ranges; long wg;
    if (!PyArg_ParseTuple(a, "KO!O!ili", &cmask, &PyTuple_Type, &args, &PyTuple_Type, &geom,
                          &ndim, &wg, &ranges)) return NULL;
    tk_slot g[9];
    if (geom_from_tuple(geom, g) < 0) return NULL;
    tk_arg xs[MAX_ARGS];
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (gather_all(cmask, args, xs) < 0) Py_RETURN_NONE;
    PyObject *key = make_key(cmask, xs, n, g, ndim, wg, ranges);
    release(xs, n);
    if (!key) { if (PyErr_Occurred()) return NULL; Py_RETURN_NONE; }
    return key;
}

static PyObject *py_run(PyObject *self, PyObject *a) {
    unsigned long long fnp, cmask; int nthreads; PyObject *args, *geom;
    if (!PyArg_ParseTuple(a, "KiKO!O!", &fnp, &nthreads, &cmask, &PyTuple_Type, &args, &PyTuple_Type, &geom))
        return NULL;
    tk_slot s[MAX_SLOTS];
    if (geom_from_tuple(geom, s) < 0) return NULL;
    tk_arg xs[MAX_ARGS];
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (gather_all(cmask, args, xs) < 0) {
        PyErr_SetString(PyExc_TypeError, "run(): an argument is not an array or scalar the launcher reads");
        return NULL;
    }
    int used, r = pack(cmask, xs, n, s, &used);
    if (r == 0) {
        Py_BEGIN_ALLOW_THREADS
        ((tk_entry)(uintptr_t)fnp)(s, FORK_SAFE(nthreads));
        Py_END_ALLOW_THREADS
    }
    release(xs, n);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}

/* fast() and prepare(): the key of a launch, its plan and checks, the packed slots.
 * Returns Py_True with the entry point in *fnp and the slots in s (used in *used) when the
 * launch may go ahead; else a new reference to what fast() returns instead (the key, None),
 * or NULL with an exception set. */
static PyObject *plan_launch(PyObject *const *a, tk_slot *s, int *used, uint64_t *fnp) {
    PyObject *plans = a[0], *args = a[2], *nd = a[3], *wgo = a[4];
    if (!PyDict_CheckExact(plans) || !PyTuple_CheckExact(args)) Py_RETURN_NONE;
    uint64_t cmask = PyLong_AsUnsignedLongLong(a[1]);
    if (PyErr_Occurred()) return NULL;
    long wg = 0;
    if (wgo != Py_None) {
        if (!PyLong_CheckExact(wgo)) Py_RETURN_NONE;
        wg = PyLong_AsLong(wgo);
        if (wg <= 0) { PyErr_Clear(); Py_RETURN_NONE; }
    }
    int ndim, ranges;
    if (parse_ndrange(nd, s, &ndim, &ranges) < 0) Py_RETURN_NONE;
    tk_arg xs[MAX_ARGS];
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (gather_all(cmask, args, xs) < 0) Py_RETURN_NONE;
    PyObject *key = make_key(cmask, xs, n, s, ndim, wg, ranges), *ret = NULL;
    if (!key) { ret = PyErr_Occurred() ? NULL : Py_NewRef(Py_None); goto out; }
    PyObject *fn = PyDict_GetItemWithError(plans, key);
    if (!fn) { ret = PyErr_Occurred() ? NULL : Py_NewRef(key); goto out; }
    if (PyBytes_CheckExact(fn)) {
        const int64_t *w = (const int64_t *)PyBytes_AS_STRING(fn);
        if (!checks_ok(w, PyBytes_GET_SIZE(fn) / 8, xs, n, s)) { ret = Py_NewRef(key); goto out; }  /* the slow path raises */
        *fnp = (uint64_t)w[0];
    } else {
        *fnp = PyLong_AsUnsignedLongLong(fn);
        if (PyErr_Occurred()) goto out;
    }
    if (pack(cmask, xs, n, s, used) < 0) goto out;
    ret = Py_NewRef(Py_True);
out:
    Py_XDECREF(key);
    release(xs, n);
    return ret;
}

static PyObject *py_fast(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 6) { PyErr_SetString(PyExc_TypeError, "fast() takes 6 arguments"); return NULL; }
    int nthreads = (int)PyLong_AsLong(a[2]);
    if (PyErr_Occurred()) return NULL;
    PyObject *pa[5] = {a[0], a[1], a[3], a[4], a[5]};
    tk_slot s[MAX_SLOTS];
    int used;
    uint64_t fnp;
    PyObject *r = plan_launch(pa, s, &used, &fnp);
    if (r == Py_True) call((tk_entry)(uintptr_t)fnp, s, nthreads);
    return r;
}

static PyObject *py_prepare(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 5) { PyErr_SetString(PyExc_TypeError, "prepare() takes 5 arguments"); return NULL; }
    tk_slot s[MAX_SLOTS];
    int used;
    uint64_t fnp;
    PyObject *r = plan_launch(a, s, &used, &fnp);
    if (r != Py_True) return r;
    Py_DECREF(r);
    /* raw()'s entry: fnptr, nslots, slot*, no patches, no pairs */
    PyObject *entry = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(used + 4) * 8);
    if (!entry) return NULL;
    int64_t *w = (int64_t *)PyBytes_AS_STRING(entry);
    w[0] = (int64_t)fnp;
    w[1] = used;
    memcpy(w + 2, s, (size_t)used * sizeof(tk_slot));
    w[2 + used] = 0;
    w[3 + used] = 0;
    return Py_BuildValue("(N)", entry);
}

static PyObject *py_template(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 3) { PyErr_SetString(PyExc_TypeError, "template() takes 3 arguments"); return NULL; }
    PyObject *args = a[1];
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) > MAX_ARGS) Py_RETURN_NONE;
    uint64_t cmask = PyLong_AsUnsignedLongLong(a[0]);
    if (PyErr_Occurred()) return NULL;
    tk_slot s[MAX_SLOTS];
    int ndim, ranges, used;
    if (parse_ndrange(a[2], s, &ndim, &ranges) < 0) Py_RETURN_NONE;
    tk_arg xs[MAX_ARGS];
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (gather_all(cmask, args, xs) < 0) Py_RETURN_NONE;
    PyObject *starts = NULL, *slots = NULL;
    if (pack(cmask, xs, n, s, &used) < 0) goto fail;
    starts = PyTuple_New(n);
    if (!starts) goto fail;
    int k = 9;
    for (Py_ssize_t i = 0; i < n; ++i) {
        long st = -1;
        if (!((cmask >> i) & 1)) {
            st = k;
            k += xs[i].is_array ? 1 + 2 * xs[i].nd : 1;
        }
        PyTuple_SET_ITEM(starts, i, PyLong_FromLong(st));
    }
    slots = PyBytes_FromStringAndSize((const char *)s, (Py_ssize_t)used * sizeof(tk_slot));
    if (!slots) goto fail;
    release(xs, n);
    return Py_BuildValue("(NN)", slots, starts);
fail:
    Py_XDECREF(starts);
    release(xs, n);
    return NULL;
}

static PyObject *py_raw(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 3) { PyErr_SetString(PyExc_TypeError, "raw() takes 3 arguments"); return NULL; }
    PyObject *entry = a[0], *vals = a[2];
    if (!PyBytes_CheckExact(entry) || !PyTuple_CheckExact(vals)) Py_RETURN_FALSE;
    int nthreads = (int)PyLong_AsLong(a[1]);
    if (PyErr_Occurred()) return NULL;
    const int64_t *w = (const int64_t *)PyBytes_AS_STRING(entry);
    Py_ssize_t nw = PyBytes_GET_SIZE(entry) / 8, nv = PyTuple_GET_SIZE(vals);
    if (nw < 2) Py_RETURN_FALSE;
    int64_t nslots = w[1];
    if (nslots < 9 || nslots > MAX_SLOTS || 2 + nslots + 1 > nw) Py_RETURN_FALSE;
    tk_slot s[MAX_SLOTS];
    memcpy(s, w + 2, (size_t)nslots * sizeof(tk_slot));
    Py_ssize_t k = 2 + nslots;
    int64_t npatch = w[k++];
    if (npatch < 0 || k + 4 * npatch + 1 > nw) Py_RETURN_FALSE;
    for (int64_t p = 0; p < npatch; ++p, k += 4) {
        int64_t v = w[k], slot = w[k + 1], kind = w[k + 2], align = w[k + 3];
        if (v < 0 || v >= nv || slot < 9 || slot >= nslots) Py_RETURN_FALSE;
        PyObject *o = PyTuple_GET_ITEM(vals, v);
        if (kind == 1) {
            if (!PyFloat_CheckExact(o)) Py_RETURN_FALSE;
            s[slot].f = PyFloat_AS_DOUBLE(o);
            continue;
        }
        if (!PyLong_CheckExact(o)) Py_RETURN_FALSE;
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow > 0 && kind == 2) {           /* a Python int in [2**63, 2**64), as pack() */
            unsigned long long u = PyLong_AsUnsignedLongLong(o);
            if (PyErr_Occurred()) { PyErr_Clear(); Py_RETURN_FALSE; }
            s[slot].i = (int64_t)u;
            continue;
        }
        if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); Py_RETURN_FALSE; }
        if (kind == 0) {
            if (align <= 0 || x % align) Py_RETURN_FALSE;
            s[slot].p = (void *)(uintptr_t)x;
        } else if (kind == 3) {
            s[slot].i = x != 0;
        } else {
            s[slot].i = x;
        }
    }
    int64_t npairs = w[k++];
    if (npairs < 0 || k + 6 * npairs > nw) Py_RETURN_FALSE;
    for (int64_t p = 0; p < npairs; ++p, k += 6) {
        int64_t vi = w[k], vj = w[k + 3];
        if (vi < 0 || vi >= nv || vj < 0 || vj >= nv) Py_RETURN_FALSE;
        long long pi = PyLong_AsLongLong(PyTuple_GET_ITEM(vals, vi)), pj = PyLong_AsLongLong(PyTuple_GET_ITEM(vals, vj));
        if (PyErr_Occurred()) { PyErr_Clear(); Py_RETURN_FALSE; }
        int64_t xl = pi + w[k + 1], xh = pi + w[k + 2], yl = pj + w[k + 4], yh = pj + w[k + 5];
        if (xl < xh && yl < yh && xl < yh && yl < xh) Py_RETURN_FALSE;
    }
    call((tk_entry)(uintptr_t)w[0], s, nthreads);
    Py_RETURN_TRUE;
}

/* DLPack structs (dlpack.h): DLManagedTensor and DLManagedTensorVersioned */
typedef struct {
    void *data;
    int32_t device_type, device_id;
    int32_t ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} tk_dltensor;
typedef struct tk_dlmanaged {
    tk_dltensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct tk_dlmanaged *);
} tk_dlmanaged;
typedef struct tk_dlmanaged_v {
    uint32_t major, minor;
    void *manager_ctx;
    void (*deleter)(struct tk_dlmanaged_v *);
    uint64_t flags;
    tk_dltensor dl_tensor;
} tk_dlmanaged_v;

static void tk_dlpack_capsule_dtor(PyObject *cap) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (PyCapsule_IsValid(cap, "dltensor")) {
        tk_dlmanaged *m = (tk_dlmanaged *)PyCapsule_GetPointer(cap, "dltensor");
        if (m && m->deleter) m->deleter(m);
    } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        tk_dlmanaged_v *m = (tk_dlmanaged_v *)PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m && m->deleter) m->deleter(m);
    }
    PyErr_Clear();          /* nothing of the deleter's escapes */
    PyErr_Restore(et, ev, tb);
}

/* The deleters of exported DLPack tensors. A consumer may call one late: XLA (JAX) frees its
 * buffers while the process exits, after Python has finalized and ctypes' callback thunks are
 * gone (a JAX program that imported a CUDA array of ours died with SIGILL at exit on an H200).
 * C functions stay valid; they call runtime/dlpack.py's release (register_dl_release) while
 * the interpreter runs and do nothing once it is finalizing (the process frees everything). */
static PyObject *dl_release = NULL;

#if PY_VERSION_HEX >= 0x030D0000
#define TK_FINALIZING() Py_IsFinalizing()
#else
#define TK_FINALIZING() _Py_IsFinalizing()
#endif

static void tk_dl_release(void *manager_ctx) {
    if (!Py_IsInitialized() || TK_FINALIZING()) return;
    PyGILState_STATE g = PyGILState_Ensure();
    if (dl_release) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *r = PyObject_CallFunction(dl_release, "K", (unsigned long long)(uintptr_t)manager_ctx);
        Py_XDECREF(r);
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    PyGILState_Release(g);
}
static void tk_dl_deleter(tk_dlmanaged *m) { tk_dl_release(m->manager_ctx); }
static void tk_dl_deleter_v(tk_dlmanaged_v *m) { tk_dl_release(m->manager_ctx); }

static PyObject *py_register_dl_release(PyObject *self, PyObject *f) {
    if (!PyCallable_Check(f)) { PyErr_SetString(PyExc_TypeError, "register_dl_release() takes a callable"); return NULL; }
    Py_XSETREF(dl_release, Py_NewRef(f));
    Py_RETURN_NONE;
}

static PyObject *py_register_host_array(PyObject *self, PyObject *t) {
    if (!PyType_Check(t)) { PyErr_SetString(PyExc_TypeError, "register_host_array() takes a type"); return NULL; }
    Py_XSETREF(host_array_type, (PyTypeObject *)Py_NewRef(t));
    Py_RETURN_NONE;
}

static PyObject *py_register_torch(PyObject *self, PyObject *const *a, Py_ssize_t na) {
    if (na != 5 || !PyTuple_CheckExact(a[0])) {
        PyErr_SetString(PyExc_TypeError, "register_torch(types, strided, dtype, typenum, itemsize)");
        return NULL;
    }
    long typenum = PyLong_AsLong(a[3]), isz = PyLong_AsLong(a[4]);
    if (PyErr_Occurred()) return NULL;
    if (typenum < 0 || isz <= 0 || isz > 0xffff) { PyErr_SetString(PyExc_ValueError, "bad type number or size"); return NULL; }
    if (!torch_dtypes && !(torch_dtypes = PyDict_New())) return NULL;
    PyObject *code = PyLong_FromLongLong(((long long)typenum << 16) | isz);
    if (!code || PyDict_SetItem(torch_dtypes, a[2], code) < 0) { Py_XDECREF(code); return NULL; }
    Py_DECREF(code);
    Py_XSETREF(torch_types, Py_NewRef(a[0]));
    Py_XSETREF(torch_strided, Py_NewRef(a[1]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"sig", py_sig, METH_VARARGS, "specialization key of a launch"},
    {"run", py_run, METH_VARARGS, "pack arguments and run a kernel"},
    {"fast", (PyCFunction)(void (*)(void))py_fast, METH_FASTCALL, "key lookup and launch in one call"},
    {"prepare", (PyCFunction)(void (*)(void))py_prepare, METH_FASTCALL,
     "fast() without the call: (raw() entry,) for a later launch"},
    {"template", (PyCFunction)(void (*)(void))py_template, METH_FASTCALL, "a launch's packed slots"},
    {"raw", (PyCFunction)(void (*)(void))py_raw, METH_FASTCALL, "launch from kept slots and new values"},
    {"register_host_array", py_register_host_array, METH_O, "the tk.Array type (its _host is read)"},
    {"register_dl_release", py_register_dl_release, METH_O, "release(manager_ctx) of exported DLPack tensors"},
    {"register_torch", (PyCFunction)(void (*)(void))py_register_torch, METH_FASTCALL,
     "a torch dtype whose CPU tensors the launcher reads directly"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_tklaunch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__tklaunch(void) {
    import_array();
#ifndef _WIN32
    static int atfork_done = 0;
    if (!atfork_done && pthread_atfork(NULL, NULL, after_fork_child) == 0) atfork_done = 1;
#endif
    if (!(host_attr = PyUnicode_InternFromString("_host")) || !(s_is_cpu = PyUnicode_InternFromString("is_cpu"))
        || !(s_layout = PyUnicode_InternFromString("layout")) || !(s_dtype = PyUnicode_InternFromString("dtype"))
        || !(s_is_neg = PyUnicode_InternFromString("is_neg")) || !(s_shape = PyUnicode_InternFromString("shape"))
        || !(s_stride = PyUnicode_InternFromString("stride"))
        || !(s_data_ptr = PyUnicode_InternFromString("data_ptr"))) return NULL;
    PyObject *m = PyModule_Create(&mod);
    if (m && (PyModule_AddObject(m, "dlpack_capsule_dtor", PyLong_FromVoidPtr((void *)tk_dlpack_capsule_dtor)) < 0
              || PyModule_AddObject(m, "dlpack_deleter", PyLong_FromVoidPtr((void *)tk_dl_deleter)) < 0
              || PyModule_AddObject(m, "dlpack_deleter_v", PyLong_FromVoidPtr((void *)tk_dl_deleter_v)) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
