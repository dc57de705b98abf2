"""Code generators: one C-like renderer base and a renderer per backend language."""
