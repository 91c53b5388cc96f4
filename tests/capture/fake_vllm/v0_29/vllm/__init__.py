"""Stand-in vLLM package (0.29.0)."""

__version__ = "0.29.0"
