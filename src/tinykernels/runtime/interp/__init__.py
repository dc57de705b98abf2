"""The interpreter backend, ``tk.Interpreter()`` (``DEV=INTERP``; ``check=True``: check mode).

It runs the kernel's own Python code, one work item at a time (the reference semantics):

* ``backend.py``    the backend class, its kernel instance and the group scheduler
* ``transform.py``  rewriting the kernel's code: barriers and collectives become ``yield``
* ``context.py``    the per-launch globals the rewritten code runs with (``tk``, ``math``, ...)
* ``memory.py``     arrays with bounds checks; race and uninitialized-read tracking
* ``ops.py``        the kernel language's operators and conversions on Python values
* ``errors.py``     the check-mode errors (``tk.KernelCheckError`` and its subclasses)
"""
from .backend import Interpreter, InterpreterKernelInstance  # noqa: F401
from .errors import (DataRaceError, DivergentBarrierError, KernelCheckError, KernelIndexError,  # noqa: F401
                     UninitializedReadError, ZeroStepError)
