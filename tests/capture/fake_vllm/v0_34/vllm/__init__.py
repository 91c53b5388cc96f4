"""Stand-in vLLM package (0.34.0)."""

__version__ = "0.34.0"
