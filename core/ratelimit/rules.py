"""What makes an operator's rate-limit rule meaningful (checked by the admin form)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import Model

from core.conf import gatehouse_settings
from core.models import RateLimitScope

# Counted per client address before anyone has signed in, so there is no tenant or target to match.
PER_IP_SCOPES = frozenset(
    {RateLimitScope.AUTHORIZE, RateLimitScope.LOGIN, RateLimitScope.REGISTER, RateLimitScope.PASSWORD_RESET}
)

PER_IP_NO_TENANT = "The {scope} limit counts requests per client address, before sign-in: leave tenant blank."
PER_IP_NO_TARGET = "The {scope} limit has no target; targets are for tool and resource limits."
PERIOD_TOO_SHORT = "The period must be at least one second."


def rate_limit_rule_validate(
    *, scope: str, target: str, tenant: Model | None, period_seconds: int | None
) -> None:
    """Raise ValidationError, keyed by field, for every problem with this rule."""
    problems: dict[str, str] = {}
    if scope in PER_IP_SCOPES:
        if tenant is not None:
            problems["tenant"] = PER_IP_NO_TENANT.format(scope=scope)
        if target:
            problems["target"] = PER_IP_NO_TARGET.format(scope=scope)
    if period_seconds is not None and period_seconds < 1:
        problems["period_seconds"] = PERIOD_TOO_SHORT
    if problems:
        raise ValidationError(problems)


def rate_limit_defaults() -> list[tuple[str, str]]:
    """The deployment's default limits (``RATE_LIMITS``, core.conf), as operators read them."""
    return [(name, rate or "no limit") for name, rate in gatehouse_settings.RATE_LIMITS.items()]
