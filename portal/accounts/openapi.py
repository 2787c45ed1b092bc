"""OpenAPI descriptions of Flowport's authentication classes, so the schema
documents how to authenticate and builds without warnings."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class TokenScheme(OpenApiAuthenticationExtension):
    target_class = "portal.accounts.authentication.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "A personal API token from your profile page: `Token fp_…`.",
        }


class SessionScheme(OpenApiAuthenticationExtension):
    target_class = "portal.accounts.authentication.SessionAuthentication"
    name = "cookieAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "cookie", "name": "sessionid"}


class BasicScheme(OpenApiAuthenticationExtension):
    target_class = "portal.accounts.authentication.BasicAuthentication"
    name = "basicAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "basic",
            "description": "Username and password (LDAP when configured).",
        }
