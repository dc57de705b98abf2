"""Analyses and transformations on the IR."""
