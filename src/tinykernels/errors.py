"""The exceptions users see."""
from __future__ import annotations


class TinyKernelsError(Exception):
    """Base class of every tinykernels error."""


class CompileError(TinyKernelsError):
    """A kernel could not be compiled; the message names the user's file, line and column."""

    def __init__(self, message: str, filename: str | None = None, line: int | None = None,
                 col: int | None = None, source_line: str | None = None, kernel: str | None = None):
        self.msg, self.filename, self.line, self.col = message, filename, line, col
        self.source_line, self.kernel = source_line, kernel
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.filename is not None and self.line is not None:
            where = f"{self.filename}:{self.line}:{(self.col or 0) + 1}: "
        elif self.filename is not None:
            where = f"{self.filename}: "
        head = f"{where}{'in kernel ' + repr(self.kernel) + ': ' if self.kernel else ''}{self.msg}"
        if self.source_line:
            text = self.source_line.rstrip("\n")
            stripped = text.lstrip()
            caret = " " * max(0, (self.col or 0) - (len(text) - len(stripped)))
            head += f"\n    {stripped}\n    {caret}^"
        return head


class LaunchError(TinyKernelsError):
    """A launch was refused: bad arguments, sizes or devices. Names the kernel and argument."""


class BackendUnavailable(TinyKernelsError):
    """A backend cannot be used on this machine; the message says what is missing and how to get it."""
