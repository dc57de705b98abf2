"""@tk.funcs in a file of their own, for tests/test_func_sites.py: errors raised inside an
inlined func must name this file and the func's line, then the kernel's call site."""
import tinykernels as tk


@tk.func
def load_past(a, i):
    return a[i + 10]                  # LOAD_PAST_LINE


@tk.func
def outer(a, i):
    return load_past(a, i) * 2.0      # OUTER_LINE


@tk.func
def store_one(a, i):
    a[i] = 1.0                        # STORE_ONE_LINE


@tk.func
def store_first(a):
    a[0] = 1.0                        # STORE_FIRST_LINE


@tk.func
def read_next(a, i):
    return a[i + 1]                   # READ_NEXT_LINE


@tk.func
def bad_call(x):
    return x @ x                      # BAD_CALL_LINE
