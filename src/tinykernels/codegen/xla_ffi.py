"""An XLA FFI handler in C for one specialization of a CPU kernel (used by tinykernels.jax).

The handler is appended to the kernel's C translation unit (:mod:`.c`). XLA calls it with a
call frame (``xla/ffi/api/c_api.h``, shipped with jaxlib); it answers XLA's metadata query,
packs the kernel's argument slots from the frame's buffers and its one attribute, and calls
``tk_kernel``: no Python in the call.

The attribute ``slots`` is an int64 array: the 9 geometry slots, then one slot per scalar
parameter (a float's IEEE bits, an int or bool's value), then the thread count. Each array
parameter is either an operand buffer (``args[i]``) or, for an output, the result buffer
``rets[j]`` (which XLA fills with the output's initial value through input/output aliasing).
XLA's buffers are dense row-major, so strides follow from the dimensions.
"""
from __future__ import annotations

from ..ir import nodes as N
from .c import GEOMETRY_SLOTS

ENTRY = "tk_xla_ffi"

_FRAME = """static XLA_FFI_Error *tk_xla_fail(const XLA_FFI_Api *api, XLA_FFI_Error_Code code, const char *msg) {{
    XLA_FFI_Error_Create_Args e;
    memset(&e, 0, sizeof e);
    e.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    e.message = msg;
    e.errc = code;
    return api->XLA_FFI_Error_Create(&e);
}}

XLA_FFI_Error *{entry}(XLA_FFI_CallFrame *cf) {{
    if (cf->extension_start != NULL && cf->extension_start->type == XLA_FFI_Extension_Metadata) {{
        XLA_FFI_Metadata *m = ((XLA_FFI_Metadata_Extension *)cf->extension_start)->metadata;
        m->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
        m->api_version.extension_start = NULL;
        m->api_version.major_version = XLA_FFI_API_MAJOR;
        m->api_version.minor_version = XLA_FFI_API_MINOR;
        m->traits = 0;
        if (m->struct_size >= offsetof(XLA_FFI_Metadata, state_type_id) + sizeof(XLA_FFI_TypeId))
            m->state_type_id.type_id = 0;
        return NULL;
    }}
    if (cf->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    if (cf->args.size != {nargs} || cf->rets.size != {nrets} || cf->attrs.size != 1
        || cf->attrs.types[0] != XLA_FFI_AttrType_ARRAY
        || ((const XLA_FFI_Array *)cf->attrs.attrs[0])->size != {nattr})
        return tk_xla_fail(cf->api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                           "tinykernels: kernel '{name}' called with a call frame it was not built for");
    const int64_t *v = (const int64_t *)((const XLA_FFI_Array *)cf->attrs.attrs[0])->data;
"""
"""The part both handlers share: the error helper, the metadata query, the stage and the frame's
shape checks, and the attribute vector ``v`` (a ``str.format`` template like the handlers)."""

_TEMPLATE = """
/* ---- XLA FFI handler (tinykernels.jax) ---- */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "xla/ffi/api/c_api.h"
#ifdef __linux__
#include <sys/mman.h>
#endif

/* A fresh output buffer from XLA is touched first by the kernel: advise huge pages for its
   2 MiB-aligned interior (4 KiB page faults cost more than the kernel's own traffic). */
static void tk_advise_huge(void *p, const int64_t *dims, int64_t rank, size_t esize) {{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    size_t n = esize;
    for (int64_t d = 0; d < rank; ++d) n *= (size_t)dims[d];
    if (n < ((size_t)1 << 22)) return;
    uintptr_t m = ((uintptr_t)1 << 21) - 1, lo = ((uintptr_t)p + m) & ~m, hi = ((uintptr_t)p + n) & ~m;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p; (void)dims; (void)rank; (void)esize;
#endif
}}

""" + _FRAME + """    tk_slot s[{nslots}];
    const XLA_FFI_Buffer *b;
    for (int k = 0; k < {geom}; ++k) s[k].i = v[k];
{advise}{packs}
    tk_kernel(s, (int)v[{nattr} - 1]);
{debug}    return NULL;
}}
"""

_DEBUG = """\
    {{
        int64_t e[12];
        tk_get_error(e);
        if (e[0]) {{
            static const char *names[] = {{{names}}};
            static const char *sites[] = {{{sites}}};
            char msg[512], idx[160] = "", shp[160] = "";
            int nd = (int)e[3];
            tk_clear_error();
            for (int d = 0; d < nd && d < 3; ++d) {{
                size_t li = strlen(idx), ls = strlen(shp);
                snprintf(idx + li, sizeof idx - li, d ? ", %lld" : "%lld", (long long)e[4 + 2 * d]);
                snprintf(shp + ls, sizeof shp - ls, d ? ", %lld" : "%lld", (long long)e[5 + 2 * d]);
            }}
            snprintf(msg, sizeof msg, "kernel '{name}' at %s: index %s%s%s is out of bounds for "
                     "%s with shape (%s%s)", e[1] >= 0 && e[1] < {nsites} ? sites[e[1]] : "?",
                     nd > 1 ? "(" : "", idx, nd > 1 ? ")" : "",
                     e[2] >= 0 && e[2] < {nnames} ? names[e[2]] : "array '?'", shp, nd == 1 ? "," : "");
            return tk_xla_fail(cf->api, XLA_FFI_Error_Code_OUT_OF_RANGE, msg);
        }}
    }}
"""


def _c_string(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def render_handler(name: str, layout: list, sources: dict, nargs: int, nrets: int, nscalars: int,
                   debug: bool = False, array_names=(), sites=(), fresh=()) -> str:
    """The handler's C source.

    ``layout``: :func:`.c.slot_layout` of the kernel; ``sources``: per parameter name,
    ``("arg", i)`` / ``("ret", j)`` for an array, ``("scalar", q)`` for the ``q``-th scalar
    slot of the attribute. ``array_names``: the debug table of :func:`.c.render_c`;
    ``sites``: the kernel IR's debug sites (``Kernel.sites``, filled by that rendering).
    ``fresh``: ``(j, element size)`` of the results that are not aliased to an operand (the
    kernel touches their pages first: huge pages are advised for large ones)."""
    advise = "".join(f"    b = (const XLA_FFI_Buffer *)cf->rets.rets[{j}];\n"
                     f"    tk_advise_huge(b->data, b->dims, b->rank, {int(esize)});\n" for j, esize in fresh)
    packs, nslots = [], GEOMETRY_SLOTS
    for p, pos in layout:
        if p[0] == "array":
            info = p[1]
            where, k = sources[info.name]
            nd = info.ndim
            packs.append(f"    b = (const XLA_FFI_Buffer *)cf->{where}s.{where}s[{k}];   /* {info.name} */")
            packs.append(f"    s[{pos}].p = b->data;")
            for d in range(nd):
                packs.append(f"    s[{pos + 1 + d}].i = b->dims[{d}];")
            packs.append(f"    s[{pos + 1 + 2 * nd - 1}].i = 1;")
            for d in range(nd - 2, -1, -1):
                packs.append(f"    s[{pos + 1 + nd + d}].i = s[{pos + 2 + nd + d}].i * b->dims[{d + 1}];")
            nslots = pos + 1 + 2 * nd
        else:
            where, q = sources[p[1]]
            packs.append(f"    s[{pos}].i = v[{GEOMETRY_SLOTS + q}];   /* {p[1]} */")
            nslots = pos + 1
    dbg = ""
    if debug:
        names = ", ".join(f'"{_c_string(N.debug_phrase(n))}"'
                          for n in array_names) or '""'
        texts = ", ".join(f'"{_c_string(N.site_text(loc))}"' for loc in sites) or '""'
        dbg = _DEBUG.format(names=names, nnames=len(array_names), name=_c_string(name), sites=texts,
                            nsites=len(sites))
    return _TEMPLATE.format(entry=ENTRY, nargs=nargs, nrets=nrets, nattr=GEOMETRY_SLOTS + nscalars + 1,
                            nslots=max(nslots, GEOMETRY_SLOTS + 1), geom=GEOMETRY_SLOTS, packs="\n".join(packs),
                            debug=dbg, name=_c_string(name), advise=advise)


# ----------------------------------------------------------------------------- CUDA

ENTRY_CUDA = "tk_xla_ffi_cuda"

_C_TYPES = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t",
            "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t", "float32": "float",
            "float64": "double", "ptr": "void *"}

_CUDA_TEMPLATE = """/* ---- XLA FFI handler for JAX's CUDA platform (tinykernels.jax): kernel '{name}' ---- */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "xla/ffi/api/c_api.h"

/* cuLaunchKernel's signature (CUresult = int, CUfunction/CUstream = pointers): its address
   comes in the attribute, so this host code needs neither cuda.h nor libcuda at link time */
typedef int (*tk_cu_launch_kernel)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shmem, void *stream, void **params, void **extra);

""" + _FRAME + """    XLA_FFI_Stream_Get_Args sg;                 /* the stream XLA runs this call on */
    memset(&sg, 0, sizeof sg);
    sg.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
    sg.ctx = cf->ctx;
    XLA_FFI_Error *err = cf->api->XLA_FFI_Stream_Get(&sg);
    if (err != NULL) return err;
    uint64_t slot[{nparams}];
    void *params[{nparams}];
    const XLA_FFI_Buffer *b;
{packs}
    for (int k = 0; k < {nparams}; ++k) params[k] = &slot[k];
    tk_cu_launch_kernel launch = (tk_cu_launch_kernel)(uintptr_t)v[{nattr} - 1];
    int rc = launch((void *)(uintptr_t)v[{nattr} - 2], {grid}, {block}, 0, sg.stream, params, NULL);
    if (rc != 0)
        return tk_xla_fail(cf->api, XLA_FFI_Error_Code_INTERNAL,
                           "tinykernels: cuLaunchKernel of kernel '{name}' failed");
    return NULL;
}}
"""


def _put(i: int, ctype: str, expr: str) -> str:
    c = _C_TYPES[ctype]
    return f"    {{ {c} x = ({c})({expr}); memset(&slot[{i}], 0, 8); memcpy(&slot[{i}], &x, sizeof x); }}"


def render_cuda_handler(name: str, layout: list, sources: dict, nargs: int, nrets: int, nscalars: int,
                        grid: tuple, block: tuple) -> str:
    """A standalone host-C handler that launches one CUDA specialization on XLA's stream.

    ``layout``: :func:`.cuda.param_layout` of the kernel (one 8-byte slot per entry, as the
    CUDA runtime packs them); ``sources`` as for :func:`render_handler`; ``grid``/``block``:
    the launch dimensions (hardware order, fixed per specialization). The attribute
    ``slots`` holds the 9 geometry slots, one slot per scalar (a float's float64 bits, an
    int or bool's value), then the ``CUfunction`` and the address of ``cuLaunchKernel``.
    XLA's buffers are dense row-major device memory."""
    packs = []
    for i, (kind, det, ct) in enumerate(layout):
        if kind in ("start", "count", "step"):
            packs.append(_put(i, ct, f"v[{3 * det + ('start', 'count', 'step').index(kind)}]"))
        elif kind == "ptr":
            where, k = sources[det.name]
            packs.append(f"    b = (const XLA_FFI_Buffer *)cf->{where}s.{where}s[{k}];   /* {det.name} */")
            packs.append(_put(i, "ptr", "b->data"))
        elif kind == "shape":
            where, k = sources[det[0].name]
            packs.append(_put(i, ct, f"((const XLA_FFI_Buffer *)cf->{where}s.{where}s[{k}])->dims[{det[1]}]"))
        elif kind == "stride":
            where, k = sources[det[0].name]
            buf = f"((const XLA_FFI_Buffer *)cf->{where}s.{where}s[{k}])"
            expr = " * ".join(f"{buf}->dims[{d}]" for d in range(det[1] + 1, det[0].ndim)) or "1"
            packs.append(_put(i, ct, expr))
        elif kind == "scalar":
            _where, q = sources[det[0]]
            if det[1].dtype.is_float:
                packs.append(f"    {{ double d; memcpy(&d, &v[{GEOMETRY_SLOTS + q}], 8);   /* {det[0]} */")
                packs.append("  " + _put(i, ct, "d") + " }")
            else:
                packs.append(_put(i, ct, f"v[{GEOMETRY_SLOTS + q}]") + f"   /* {det[0]} */")
        else:
            raise ValueError("the CUDA FFI handler does not support debug mode (its error buffer)")
    return _CUDA_TEMPLATE.format(entry=ENTRY_CUDA, name=_c_string(name), nargs=nargs, nrets=nrets,
                                 nattr=GEOMETRY_SLOTS + nscalars + 2, nparams=max(len(layout), 1),
                                 packs="\n".join(packs), grid=", ".join(str(int(g)) for g in grid),
                                 block=", ".join(str(int(x)) for x in block))
