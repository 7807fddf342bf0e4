"""An upstream's elicitation answered through Gatehouse: to the upstream, the client is Gatehouse,
so an accepted form gets the requested schema's defaults for the fields the person's client left
out (SEP-1034); nothing else is touched (``upstreams.pool.elicitation_defaults_applied``)."""

from __future__ import annotations

from mcp_types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult, ErrorData

from upstreams.pool import elicitation_defaults_applied

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "Ada"},
        "count": {"type": "integer", "default": 3},
        "note": {"type": "string"},
    },
}
FORM = ElicitRequestFormParams(message="Who?", requested_schema=SCHEMA)


def test_an_accepted_form_gets_the_defaults_of_the_fields_left_out():
    answer = ElicitResult(action="accept", content={"name": "Grace"})

    applied = elicitation_defaults_applied(FORM, answer)

    assert isinstance(applied, ElicitResult)
    assert applied.content == {"name": "Grace", "count": 3}


def test_a_declined_or_cancelled_answer_is_passed_on_as_it_is():
    for action in ("decline", "cancel"):
        answer = ElicitResult(action=action)
        assert elicitation_defaults_applied(FORM, answer) is answer


def test_an_error_or_a_url_elicitation_is_passed_on_as_it_is():
    error = ErrorData(code=-32600, message="no")
    url = ElicitRequestURLParams(message="Go", url="https://example.test/", elicitation_id="e1")
    accepted = ElicitResult(action="accept", content={})

    assert elicitation_defaults_applied(FORM, error) is error
    assert elicitation_defaults_applied(url, accepted) is accepted
