"""Stand-in vLLM package (0.15.0)."""

__version__ = "0.15.0"
