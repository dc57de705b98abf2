"""Reading a Python function's source and AST, and making located compile errors."""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from ..errors import CompileError
from ..ir.nodes import Loc


@dataclass
class FuncSource:
    """A kernel or device function's parsed source."""
    fn: object
    name: str
    file: str
    first_line: int          # line number of the ``def`` in the file
    indent: int              # columns removed by dedent
    lines: list              # the source lines of the file region
    tree: ast.FunctionDef
    text: str

    def loc(self, node) -> Loc:
        return Loc(self.file, self.first_line + getattr(node, "lineno", 1) - 1,
                   getattr(node, "col_offset", 0) + self.indent)

    def error(self, node, msg: str, kernel: str | None = None) -> CompileError:
        loc = self.loc(node)
        k = loc.line - self.first_line
        src = self.lines[k] if 0 <= k < len(self.lines) else None
        return CompileError(msg, loc.file, loc.line, loc.col, src, kernel=kernel)


def parse_function(fn) -> FuncSource:
    """Parse ``fn``'s source; a function without source is a CompileError."""
    try:
        lines, start = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or "<unknown>"
    except (OSError, TypeError) as e:
        raise CompileError(f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {e}") from None
    text = "".join(lines)
    ded = textwrap.dedent(text)
    indent = len(lines[0]) - len(lines[0].lstrip())
    mod = ast.parse(ded)
    fdef = next((n for n in mod.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fdef is None:
        raise CompileError(f"{fn!r} is not a function defined with def")
    return FuncSource(fn, fn.__name__, file, start, indent, lines, fdef, text)
