"""btu_demo: the dev bench's own app, which declares the demo's task functions (hooks.py)."""

__version__ = "0.0.1"
