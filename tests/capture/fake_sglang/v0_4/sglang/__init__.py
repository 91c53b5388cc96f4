from sglang.version import __version__ as __version__
