"""Halo exchanges as DaCe graph nodes, and programs that compile a whole model step."""
