"""DOT's grant and token models, swapped so that each one belongs to exactly one tenant.

The tenant is chosen on the consent page, stored on the grant, copied to the access and refresh
tokens minted from it, and carried along each refresh rotation (oauth.validators).
"""

from __future__ import annotations

from django.db import models
from oauth2_provider.models import AbstractAccessToken, AbstractGrant, AbstractRefreshToken

from accounts.models import Tenant


class Grant(AbstractGrant):
    tenant: models.ForeignKey[Tenant, Tenant] = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="+"
    )

    class Meta(AbstractGrant.Meta):
        swappable = "OAUTH2_PROVIDER_GRANT_MODEL"


class AccessToken(AbstractAccessToken):
    # Null only for DOT's RFC 7592 registration-management tokens, which belong to no user.
    tenant: models.ForeignKey[Tenant | None, Tenant | None] = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="+", null=True, blank=True
    )

    class Meta(AbstractAccessToken.Meta):
        swappable = "OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL"


class RefreshToken(AbstractRefreshToken):
    tenant: models.ForeignKey[Tenant, Tenant] = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="+"
    )

    class Meta(AbstractRefreshToken.Meta):
        swappable = "OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL"
