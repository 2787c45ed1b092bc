"""Builders the tests share: data, fixtures and helpers several test modules use.

A test module never imports another test module (tests/unit/test_test_imports.py); what two
of them need lives here, or in tests/factories.py for model factories.
"""
