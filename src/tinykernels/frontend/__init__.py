"""Frontend: Python source of a kernel to typed IR."""
from .source import FuncSource, parse_function  # noqa: F401
from .lower import ArraySpec, ScalarSpec, ConstexprSpec, LowerOptions, lower_kernel  # noqa: F401
