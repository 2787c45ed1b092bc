"""Factories for the people and things tests are about."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from portal.flows.models import FlowConfig

PASSWORD = "correct horse battery staple"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def save_password(obj, create, extracted, **kwargs):
        if create:
            obj.save()


class FlowConfigFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = FlowConfig

    flow_group = "sales"
    flow_name = factory.Sequence(lambda n: f"orders-{n}")
    schedule = "*/15 * * * *"
    source = "pg-orders"
    destinations = factory.LazyFunction(lambda: ["lake"])
    properties = factory.LazyFunction(lambda: {"source.jdbc.tables": "orders"})
    owner = factory.SubFactory(UserFactory)
