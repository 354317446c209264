"""Fixtures of the PD role tests (defined in tests/support/pd_answers.py, shared from there)."""

from tests.support.pd_answers import colocated_answers  # noqa: F401 - re-exported as a fixture
