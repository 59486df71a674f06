"""Helpers the tests share (never imported from a test_*.py module)."""
