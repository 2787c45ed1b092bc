"""DRF authentication: personal API tokens, session and HTTP Basic (which goes
through AUTHENTICATION_BACKENDS, so against LDAP when configured), each
honouring the proxy header."""

from __future__ import annotations

from rest_framework import authentication, exceptions

from portal.accounts import proxy, tokens


class ProxyMixin(authentication.BaseAuthentication):
    """Put before a DRF authentication class: its user, then the proxy header."""

    def authenticate(self, request):
        result = super().authenticate(request)
        if result is None:
            return None
        user, auth = result
        return proxy.apply_proxy(request._request, user), auth


class TokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token fp_…`. First in the list, so its
    WWW-Authenticate header makes unauthenticated calls 401 (and names Basic too)."""

    keyword = "Token"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header: use 'Token <key>'.")
        try:
            key = header[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        token = tokens.authenticate_key(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        return proxy.apply_proxy(request._request, token.user), token

    def authenticate_header(self, request) -> str:
        """The 401's challenge offers every scheme a program may answer: a token, and HTTP Basic
        for the clients that send credentials only when challenged (`curl --anyauth`,
        java.net.Authenticator). Not to a browser (it says so with Sec-Fetch-* headers): it
        would ask for a password and then send it unasked on every request to the portal,
        cross-site ones included, which the session's CSRF check never sees."""
        challenge = f'{self.keyword} realm="api"'
        if request.META.get("HTTP_SEC_FETCH_MODE") or request.META.get("HTTP_SEC_FETCH_SITE"):
            return challenge
        return f'{challenge}, Basic realm="api", charset="UTF-8"'


class SessionAuthentication(ProxyMixin, authentication.SessionAuthentication):
    pass


class BasicAuthentication(ProxyMixin, authentication.BasicAuthentication):
    pass
