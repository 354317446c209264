"""Helpers shared by pdctl's tests (free ports, starting real servers)."""
