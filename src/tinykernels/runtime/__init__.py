"""Runtimes: compilers, caches, launchers, streams; separate from code generation."""
