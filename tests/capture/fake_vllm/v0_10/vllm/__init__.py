"""Stand-in vLLM package (0.10.2)."""

__version__ = "0.10.2"
