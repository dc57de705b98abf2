"""Reading a Python function's source and AST, and making located compile errors."""
from __future__ import annotations

import ast
import inspect
import linecache
import re
import sys
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


NO_SOURCE_HELP = (
    "Python keeps no source for functions defined in {where}. Define kernels in a file, a "
    "notebook cell or IPython; for code run with exec(), register the text first: "
    "linecache.cache[name] = (len(src), None, src.splitlines(True), name) and compile(src, name, "
    "'exec') (docs/language.md, 'Where kernels can be defined')")


def _dash_c_program() -> str | None:
    """The program text of ``python -c PROGRAM`` (``sys.orig_argv``), or None."""
    argv = getattr(sys, "orig_argv", None) or []
    for k, a in enumerate(argv[:-1]):
        if a == "-c":
            return argv[k + 1]
        if a.startswith("-c") and len(a) > 2:
            return a[2:]
    return None


def _history_block(name: str) -> list[str] | None:
    """The last ``def name`` block (with its decorators) typed at the plain REPL, from
    readline's history (one entry per line typed), or None."""
    try:
        import readline
    except ImportError:
        return None
    items = [readline.get_history_item(i) or "" for i in range(1, readline.get_current_history_length() + 1)]
    head = re.compile(rf"\s*(async\s+)?def\s+{re.escape(name)}\s*\(")
    for k in range(len(items) - 1, -1, -1):
        if head.match(items[k]) and not items[k][:1].isspace():
            start = k
            while start > 0 and items[start - 1].startswith("@"):
                start -= 1
            end = k + 1
            while end < len(items) and (items[end][:1].isspace() or not items[end].strip()):
                end += 1
            return [ln + "\n" for ln in items[start:end]]
    return None


def _register_missing_source(fn) -> bool:
    """Make the source of a function defined by ``python -c`` or at the plain REPL readable
    through linecache (where inspect looks). True when something was registered."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_filename in linecache.cache:
        return False
    if code.co_filename == "<string>":
        text = _dash_c_program()
        if text is None:
            return False
        lines = text.splitlines(True)
    elif code.co_filename == "<stdin>":
        block = _history_block(fn.__name__)
        if block is None:
            return False
        lines = ["\n"] * (code.co_firstlineno - 1) + block
    else:
        return False
    k = code.co_firstlineno - 1
    if not (0 <= k < len(lines) and re.match(rf"\s*(@|(async\s+)?def\s+{re.escape(fn.__name__)}\b)", lines[k])):
        return False                     # not the text this function came from (e.g. exec)
    linecache.cache[code.co_filename] = (sum(map(len, lines)), None, lines, code.co_filename)
    return True


def _source_lines(fn) -> tuple[list, int, str]:
    """``(lines, first line, file)`` of ``fn``'s definition; a CompileError saying what to do
    when Python kept no source."""
    name = getattr(fn, "__name__", fn)
    for attempt in (0, 1):
        try:
            lines, start = inspect.getsourcelines(fn)
            return lines, start, inspect.getsourcefile(fn) or "<unknown>"
        except (OSError, TypeError) as e:
            if attempt == 0 and _register_missing_source(fn):
                continue
            code = getattr(fn, "__code__", None)
            if code is None:
                raise CompileError(f"cannot read the source of {name!r}: {e}") from None
            where = {"<stdin>": "the interactive interpreter", "<string>": "a string (python -c or exec)"}.get(
                code.co_filename, code.co_filename)
            raise CompileError(f"cannot read the source of {name!r}: " + NO_SOURCE_HELP.format(where=where)) from None
    raise AssertionError("unreachable")


def parse_function(fn) -> FuncSource:
    """Parse ``fn``'s source; a function without source is a CompileError."""
    lines, start, file = _source_lines(fn)
    text = "".join(lines)
    ded = textwrap.dedent(text)
    indent = len(lines[0]) - len(lines[0].lstrip())
    mod = ast.parse(ded)
    fdef = next((n for n in mod.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if fdef is None:
        raise CompileError(f"{fn!r} is not a function defined with def")
    src = FuncSource(fn, fn.__name__, file, start, indent, lines, fdef, text)
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is not None and (fdef.name != code.co_name or [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
                             != list(code.co_varnames[:code.co_argcount])):
        # the text at the function's line is another def: the file changed after it was imported (a
        # KeyError from inside the compiler, on a parameter of the other def, until audit spec19)
        raise CompileError(f"the source of '{fn.__name__}' at {code.co_filename}:{code.co_firstlineno} is not that "
                           f"function's any more "
                           f"(found 'def {fdef.name}(...)' there): the file changed after it was imported; "
                           "import it again (importlib.reload) or restart Python", kernel=fn.__name__)
    if isinstance(fdef, ast.AsyncFunctionDef):      # its body would compile, but a call of it is a coroutine
        raise src.error(fdef, "an 'async def' function cannot be a kernel or a @tk.func: define it with "
                              "plain 'def'", kernel=fn.__name__)
    return src


_ARRAY_ATTRS = frozenset({"shape", "ndim", "size", "dtype", "strides"})


def array_params(src: FuncSource, _seen: frozenset = frozenset()) -> frozenset:
    """The parameters ``src``'s body uses as arrays (``A[...]``, ``A.shape``/``ndim``/``size``/
    ``dtype``, ``len(A)``, the array of a ``tk.atomic_*``), also through the ``@tk.func``
    functions it passes them to. A launch uses it for 0-d arrays only: a 0-d array is an array
    where the kernel uses the parameter as one (``A[()]``), and its scalar value elsewhere."""
    from ..lang import Func
    params = [a.arg for a in src.tree.args.args]
    names = set(params)
    used: set = set()
    env = dict(getattr(src.fn, "__globals__", {}))
    try:
        env.update(inspect.getclosurevars(src.fn).nonlocals)
    except (TypeError, ValueError):
        pass

    def callee(f):
        obj = env.get(f.id) if isinstance(f, ast.Name) else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            obj = getattr(env.get(f.value.id), f.attr, None)
        return obj

    for node in ast.walk(src.tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            used.add(node.value.id)
        elif isinstance(node, ast.Attribute) and node.attr in _ARRAY_ATTRS and isinstance(node.value, ast.Name):
            used.add(node.value.id)
        elif isinstance(node, ast.Call):
            f, args = node.func, node.args
            fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if (fname == "len" or fname.startswith("atomic_")) and args and isinstance(args[0], ast.Name):
                used.add(args[0].id)
            obj = callee(f)
            if isinstance(obj, Func) and obj not in _seen:
                try:
                    inner_src = parse_function(obj.fn)
                except CompileError:
                    continue
                inner = [a.arg for a in inner_src.tree.args.args]
                inner_used = array_params(inner_src, _seen | {obj})
                for k, a in enumerate(args):
                    if isinstance(a, ast.Name) and k < len(inner) and inner[k] in inner_used:
                        used.add(a.id)
                for kw in node.keywords:
                    if isinstance(kw.value, ast.Name) and kw.arg in inner_used:
                        used.add(kw.value.id)
    return frozenset(used & names)
