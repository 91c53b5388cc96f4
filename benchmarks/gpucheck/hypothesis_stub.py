"""A stand-in for hypothesis, written where pytest imports it when hypothesis is missing."""

HYPOTHESIS_STUB = '''"""A stand-in for hypothesis (not installed), written by gpu_check.py.

Property tests (``@given``) skip; everything else imports and runs as usual.
"""

from typing import Any

import pytest


class _Anything:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> "_Anything":
        return _Anything()

    def __getattr__(self, name: str) -> "_Anything":
        return _Anything()

    def __getitem__(self, key: Any) -> "_Anything":
        return _Anything()

    def __or__(self, other: Any) -> "_Anything":
        return _Anything()

    __ror__ = __or__


def given(*args: Any, **kwargs: Any) -> Any:
    def decorate(fn: Any) -> Any:
        def skipped() -> None:
            pytest.skip("hypothesis is not installed (gpu_check stand-in)")

        skipped.__name__ = fn.__name__
        skipped.__qualname__ = fn.__qualname__
        skipped.__module__ = fn.__module__
        skipped.pytestmark = list(getattr(fn, "pytestmark", []))  # type: ignore[attr-defined]
        return skipped

    return decorate


class settings:
    max_examples = 100
    deadline = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return _Anything()

    def __call__(self, fn: Any) -> Any:
        return fn

    @staticmethod
    def register_profile(*args: Any, **kwargs: Any) -> None:
        pass

    @staticmethod
    def load_profile(*args: Any, **kwargs: Any) -> None:
        pass

    @staticmethod
    def get_profile(*args: Any, **kwargs: Any) -> "settings":
        return settings()


def example(*args: Any, **kwargs: Any) -> Any:
    return lambda fn: fn


def assume(condition: Any) -> bool:
    return True


HealthCheck = _Anything()
Verbosity = _Anything()
Phase = _Anything()


def __getattr__(name: str) -> Any:
    return _Anything()
'''

HYPOTHESIS_STUB_STRATEGIES = '''"""Stand-in strategies (gpu_check): all inert."""

from typing import Any

from hypothesis import _Anything


def composite(fn: Any) -> Any:
    return _Anything()


def __getattr__(name: str) -> Any:
    return _Anything()
'''
