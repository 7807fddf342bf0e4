"""Testing a tenant's language model: one tiny call, answered or not, for the person who asked.

Shared by the admin's *Test the model* action and the console's button. The call goes through the
governed path like every model call (``language_models.governed``): it is rate limited, counted
against the tenant's budgets, and leaves a usage record (feature ``model_test``) and a
``model.called`` audit row naming the person. What the provider answered, or why it did not, comes
back as a ``ModelTestResult``; a refusal is a result to show, never an exception for the caller.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from asgiref.sync import ThreadSensitiveContext, async_to_sync

from accounts.models import Membership, User
from core.errors import GatehouseError
from core.identity import Identity
from language_models.governed import Completion, Feature, ModelUse, model_complete
from language_models.models import LanguageModel
from language_models.selectors import ModelConfig

logger = logging.getLogger(__name__)

TEST_PROMPT = [{"role": "user", "content": "Reply with the single word OK."}]
# The call site's name for the log and the scripted answers of the tests.
TEST_PURPOSE = "model_test"
# How much of the reply the result keeps: enough to recognise it, never a page of it.
REPLY_SHOWN = 200
UNEXPECTED_FAILURE = "The call failed unexpectedly ({kind}); the server's log has the details."
# The role an operator's call is recorded with when they are not a member of the model's tenant.
OPERATOR_ROLE = "operator"


@dataclass(frozen=True)
class ModelTestResult:
    """What one test call of a model came to: the reply's first characters and its tokens, or why
    it failed; its latency either way (milliseconds, as the caller waited)."""

    model: str
    ok: bool
    latency_ms: int
    reply: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def language_model_test(*, model: LanguageModel, by: User, channel: str = "console") -> ModelTestResult:
    """Call ``model`` once with a one-word prompt as ``by`` (``channel`` names where they asked:
    ``console`` or ``admin``)."""
    started = time.monotonic()
    try:
        config = ModelConfig.from_language_model(model)
        completion = async_to_sync(_complete)(use=_use(model=model, by=by, channel=channel), config=config)
    except GatehouseError as error:
        return ModelTestResult(model=model.model, ok=False, latency_ms=_since(started), error=error.message)
    except Exception as error:
        # The governed path translates the provider's errors; anything else is ours, logged in full.
        logger.exception("Testing language model %s failed unexpectedly", model.pk)
        message = UNEXPECTED_FAILURE.format(kind=type(error).__name__)
        return ModelTestResult(model=model.model, ok=False, latency_ms=_since(started), error=message)
    return ModelTestResult(
        model=completion.model,
        ok=True,
        latency_ms=_since(started),
        reply=completion.text[:REPLY_SHOWN],
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
    )


def _use(*, model: LanguageModel, by: User, channel: str) -> ModelUse:
    """The person testing the tenant's model: the call counts against that tenant's budgets and is
    recorded as its usage, as every model call is."""
    tenant = model.tenant
    role = Membership.objects.filter(user=by, tenant=tenant).values_list("role", flat=True).first()
    identity = Identity(
        user_id=by.pk,
        username=by.get_username(),
        tenant_id=tenant.pk,
        tenant_slug=tenant.slug,
        tenant_name=tenant.name,
        role=role or OPERATOR_ROLE,
        scopes=frozenset(),
        application_id=0,
        client_id=channel,
        client_name="Console" if channel == "console" else "Django admin",
        token_id=0,
    )
    return ModelUse(identity=identity, feature=Feature.MODEL_TEST, channel=channel)


async def _complete(*, use: ModelUse, config: ModelConfig) -> Completion:
    # The governed path's database work runs on threads of its own (core.db.db_call), never on
    # this request's thread, whose connection it would otherwise close mid-request.
    async with ThreadSensitiveContext():
        return await model_complete(use=use, config=config, messages=TEST_PROMPT, purpose=TEST_PURPOSE)


def _since(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
