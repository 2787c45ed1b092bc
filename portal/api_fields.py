"""Serializer fields shared by Flowport's APIs."""

from __future__ import annotations

from rest_framework import serializers


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans instead of coercing
    them: property maps are string → string, as in Gobblin."""

    default_error_messages = {"not_a_string": "Must be a string, not {type}."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string", type=type(data).__name__)
        return super().to_internal_value(data)


class StringMapField(serializers.DictField):
    child = StrictCharField(allow_blank=True, trim_whitespace=False)
