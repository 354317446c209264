"""Fixtures of the reference-engine tests (defined in tests/support/, shared from there): the in-process engine
driver and one real HTTP server per module for the API tests."""

from tests.support.inprocess import engine_factory  # noqa: F401 - re-exported as a fixture
from tests.support.servers import server  # noqa: F401 - re-exported as a fixture
