"""Fixtures of the reference-engine tests (defined in tests/support/inprocess.py, shared from there)."""

from tests.support.inprocess import engine_factory  # noqa: F401 - re-exported as a fixture
