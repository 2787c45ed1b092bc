"""The portal's Django-free secret handling, on the bottom layer so the Spark runtime, the keys
app and every page share it: which keys name a secret, the `ENC(...)` format, the master key and
the wrapped customer keys."""
