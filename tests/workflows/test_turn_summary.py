"""The one-line summary a workflow turn's tool result starts with. Shown failing before: a turn whose
request matched no command read "No command failed: The language model found no command ..."."""

from __future__ import annotations

import json

from mcp_types import TextContent

from workflows.outputs import CommandOutput, CommandResponse
from workflows.turn_tools import output_result


def _output(**fields: object) -> CommandOutput:
    values: dict[str, object] = {"success": True, "workflow_name": "sales", "context": "sales"}
    return CommandOutput.model_validate({**values, **fields})


def _text(block: object) -> str:
    assert isinstance(block, TextContent), block
    return block.text


def _summary(output: CommandOutput) -> str:
    return _text(output_result(output).content[0])


def test_a_command_that_ran_is_named_with_its_verdict():
    output = _output(command_name="sales/TopRegions", command_responses=[CommandResponse(response="3 rows")])
    assert _summary(output) == "sales/TopRegions ok: 3 rows"
    failed = _output(
        success=False, command_name="sales/TopRegions", command_responses=[CommandResponse(response="x")]
    )
    assert _summary(failed) == "sales/TopRegions failed: x"


def test_a_turn_that_ran_no_command_says_only_why():
    why = "The language model found no command for this request: it asks about the weather."
    output = _output(success=False, command_name="", command_responses=[CommandResponse(response=why)])
    assert _summary(output) == why
    assert _summary(_output(success=False, command_name="")) == "No command ran."
    # The structured content is unchanged: the same JSON as before, in the text block after.
    assert json.loads(_text(output_result(output).content[-1]))["command_name"] == ""
