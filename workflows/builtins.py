"""The three commands every context has: where am I, go elsewhere, what can I run here.

They read nothing the resolver has not already read (the workflow and the caller's visible
commands), so they answer without touching the database.
"""

from __future__ import annotations

from typing import Any

from workflows.catalogue import CommandInfo, WorkflowView, expected_form, parameters_described
from workflows.models import Builtin
from workflows.outputs import CommandResponse


def command_listing(command: CommandInfo) -> dict[str, Any]:
    """A command as ``get_commands`` and ``list_commands`` show it."""
    return {
        "name": command.qualified_name,
        "description": command.description,
        "parameters": parameters_described(command),
        "examples": list(command.examples),
    }


def builtin_run(
    *,
    builtin: str,
    context: str,
    parameters: dict[str, Any],
    workflow: WorkflowView,
    visible: tuple[CommandInfo, ...],
) -> tuple[CommandResponse, str]:
    """The built-in's answer in ``context`` and the context after it. ``go_to_context``'s target was
    checked when the command was resolved."""
    if builtin == Builtin.GO_TO_CONTEXT:
        target = workflow.context(str(parameters.get("context", "")))
        assert target is not None  # command_resolve refused any other
        text = f"You are now in the {target.name} context" + (
            f": {target.description}" if target.description else "."
        )
        return (
            CommandResponse(
                response=text,
                artifacts={"context": target.name, "description": target.description, "previous": context},
                next_actions=[f"{target.name}/{Builtin.LIST_COMMANDS}"],
            ),
            target.name,
        )
    current = workflow.context(context)
    description = current.description if current is not None else ""
    if builtin == Builtin.WHAT_IS_CURRENT_CONTEXT:
        text = f"You are in the {context} context" + (f": {description}" if description else ".")
        others = [c.name for c in workflow.contexts if c.name != context]
        if others:
            text += f" Other contexts: {', '.join(others)}."
        return (
            CommandResponse(
                response=text,
                artifacts={
                    "context": context,
                    "description": description,
                    "contexts": [c.name for c in workflow.contexts],
                },
                next_actions=[f"{context}/{Builtin.LIST_COMMANDS}"],
            ),
            context,
        )
    lines = [f"Commands of the {context} context:"]
    lines += [
        f"- {expected_form(c)}: {c.description}" if c.description else f"- {expected_form(c)}"
        for c in visible
    ]
    return (
        CommandResponse(
            response="\n".join(lines),
            artifacts={"context": context, "commands": [command_listing(c) for c in visible]},
            next_actions=[e for c in visible for e in c.examples[:1]],
        ),
        context,
    )
