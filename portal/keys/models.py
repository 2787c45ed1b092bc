"""Customer keys, stored only wrapped: the portal never keeps a plaintext key."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q

from portal.accounts import access


class CustomerKeyQuerySet(access.AccessQuerySet):
    def usable_by(self, user) -> CustomerKeyQuerySet:
        """Keys `user` may list and use: their own and their groups' (keys.rules)."""
        return self.restrict(user, access.VIEW)


class CustomerKey(models.Model):
    """A customer's AES-256 key wrapped by the portal's master key, owned by a
    user or by a group (exactly one)."""

    owner_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="customer_keys",
    )
    owner_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.CASCADE, related_name="customer_keys"
    )
    label = models.CharField(max_length=128, blank=True)
    wrapped_key = models.TextField(help_text="Base64 envelope: the key AES-GCM-encrypted by a master key.")
    master_key_id = models.CharField(max_length=64, help_text="The master key that wrapped it.")
    fingerprint = models.CharField(
        max_length=64, db_index=True, help_text="HMAC-SHA256 of the key: identifies it, reveals nothing."
    )
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = CustomerKeyQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(owner_user__isnull=False, owner_group__isnull=True)
                | Q(owner_user__isnull=True, owner_group__isnull=False),
                name="customerkey_one_owner",
            ),
            models.UniqueConstraint(
                fields=["owner_user", "label"],
                condition=Q(owner_user__isnull=False) & ~Q(label=""),
                name="customerkey_unique_user_label",
            ),
            models.UniqueConstraint(
                fields=["owner_group", "label"],
                condition=Q(owner_group__isnull=False) & ~Q(label=""),
                name="customerkey_unique_group_label",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.owner_name}: {self.label or self.short_fingerprint}"

    @property
    def owner_name(self) -> str:
        if self.owner_group is not None:
            return f"group {self.owner_group.name}"
        return self.owner_user.get_username() if self.owner_user else "?"

    @property
    def binding(self) -> str:
        """The owner its ENC(...) values are bound to (AEAD associated data):
        they decrypt only in flows this owner owns."""
        return f"group:{self.owner_group_id}" if self.owner_group_id else f"user:{self.owner_user_id}"

    @property
    def short_fingerprint(self) -> str:
        return self.fingerprint[:16]
