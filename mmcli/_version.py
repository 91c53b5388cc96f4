"""The package version, kept in one place (read by setuptools and ``mmcli --version``)."""

__version__ = "0.1.0"
