"""Fixtures shared by the unit tests: the sandbox attack host (tests/unit/sandbox_host.py)."""

from tests.unit.sandbox_host import host  # noqa: F401 - a fixture, found by pytest here
