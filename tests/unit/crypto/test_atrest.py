"""Sealed values (crypto.atrest): what the portal reads back itself, such as a subscriber's
webhook URL, is unreadable in its database, fails loudly when changed, and moves to a new master
key without its ciphertext changing."""

from __future__ import annotations

import pytest

from portal.crypto import atrest, client, wrapping
from portal.crypto.errors import WrappedKeyError
from portal.crypto.master import new_ring

HOOK = "https://hooks.example.org/services/T000/B000/sEcReTtOkEn"


def test_a_sealed_value_reads_back_and_shows_nothing_of_itself():
    ring = new_ring()
    sealed = atrest.seal(ring, HOOK)
    assert atrest.is_sealed(sealed) and "sEcReTtOkEn" not in sealed and "hooks" not in sealed
    assert atrest.unseal(ring, sealed) == HOOK
    assert atrest.seal(ring, HOOK) != sealed  # a data key and nonce of its own each time
    assert atrest.master_key_id(sealed) == ring.active_id


def test_halves_of_two_sealed_values_do_not_fit_together_and_a_changed_one_fails():
    ring = new_ring()
    one, other = atrest.seal(ring, HOOK), atrest.seal(ring, "https://other.example.org/")
    swapped = one.rsplit(":", 1)[0] + ":" + other.rsplit(":", 1)[1]
    with pytest.raises(client.EncryptedValueError) as caught:
        atrest.unseal(ring, swapped)
    assert caught.value.code == "wrong_key"
    with pytest.raises(WrappedKeyError):
        atrest.unseal(new_ring(), one)  # another portal's master key
    with pytest.raises(WrappedKeyError):
        atrest.unseal(ring, "SEALED:not-a-value")


def test_resealing_re_wraps_only_the_data_key():
    ring = new_ring()
    sealed = atrest.seal(ring, HOOK)
    rotated = ring.with_new_active_key()
    resealed = atrest.reseal(rotated, sealed)
    assert atrest.master_key_id(resealed) == rotated.active_id != ring.active_id
    assert resealed.rsplit(":", 1)[1] == sealed.rsplit(":", 1)[1]  # the value's ciphertext as it was
    assert atrest.unseal(rotated.without({ring.active_id}), resealed) == HOOK
    assert wrapping.parse(resealed[len(atrest.PREFIX) :].split(":", 1)[0]).master_key_id == rotated.active_id
