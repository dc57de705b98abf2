"""The typed intermediate representation that every pass and code generator reads."""
from .nodes import *  # noqa: F401,F403
