"""What a caller may run: the commands of a context, as plain values the tools, the assistant and
the agent share (no ORM objects cross this line).

The selectors are synchronous (the ORM): call them through ``core.db.db_call``. Visibility is the
one rule ``get_commands``, ``execute_command`` and the agent share: a command is visible when its
tool's toolset is enabled for the tenant (a query's: ``data_agent``) and the caller holds every
scope its tool (or ``run_query``, for a query) needs. Built-ins need nothing more than the tool that
runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.errors import InvalidInput, NotFound
from data_agent.scopes import SCOPE_DATA_AGENT_WRITE, SCOPE_ONTOLOGIES_READ
from mcp_gateway.kernel.registry import default_registry
from workflows.models import ActionKind, Builtin, Workflow, WorkflowCommand, WorkflowContext

NO_WORKFLOW = (
    "This tenant has no workflow yet. An operator can import one (python manage.py import_workflow"
    " TENANT FILE) or create one in the admin (Workflows)."
)
UNKNOWN_CONTEXT = "There is no context named {name!r} in this workflow. Its contexts: {contexts}."
# The scopes and toolset of data_agent's run_query, which a query command stands in for.
QUERY_SCOPES = frozenset({SCOPE_ONTOLOGIES_READ, SCOPE_DATA_AGENT_WRITE})
QUERY_TOOLSET = "data_agent"


@dataclass(frozen=True)
class ParameterInfo:
    name: str
    type: str  # string, integer, number, boolean or date
    required: bool
    description: str = ""
    default: Any = None


@dataclass(frozen=True)
class CommandInfo:
    """One command a caller may see: a workflow command or a built-in of the current context."""

    qualified_name: str  # context/Name
    description: str
    parameters: tuple[ParameterInfo, ...] = ()
    examples: tuple[str, ...] = ()
    # The scopes running it needs, beyond workflows:run (its tool's, or a query's).
    scopes: frozenset[str] = field(default_factory=frozenset)
    action: CommandAction | None = None

    @property
    def context(self) -> str:
        return self.qualified_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.qualified_name.split("/", 1)[1]


@dataclass(frozen=True)
class CommandAction:
    """What a command runs, as ``workflows.execution`` needs it (never shown to a caller as such)."""

    kind: str  # tool, query or builtin (models.ActionKind)
    tool_name: str = ""
    # (tool argument, command parameter) pairs: the tool's arguments are filled from the command's.
    tool_arguments: tuple[tuple[str, str], ...] = ()
    ontology_id: str | None = None  # None for a query whose ontology was deleted
    sql: str = ""
    builtin: str = ""  # models.Builtin for a built-in


@dataclass(frozen=True)
class ContextView:
    name: str
    description: str


@dataclass(frozen=True)
class WorkflowView:
    tenant_id: int
    name: str
    description: str
    purpose: str
    contexts: tuple[ContextView, ...]

    def context(self, name: str) -> ContextView | None:
        return next((c for c in self.contexts if c.name == name), None)


def _workflow(*, tenant_id: int) -> Workflow:
    workflow = Workflow.objects.filter(tenant_id=tenant_id).first()
    if workflow is None:
        raise NotFound(NO_WORKFLOW)
    return workflow


def _contexts(workflow: Workflow) -> list[WorkflowContext]:
    return list(WorkflowContext.objects.filter(workflow=workflow).order_by("order", "name"))


def workflow_view(*, tenant_id: int) -> WorkflowView:
    """The tenant's workflow and its contexts in order; NotFound when it has none."""
    workflow = _workflow(tenant_id=tenant_id)
    return WorkflowView(
        tenant_id=tenant_id,
        name=workflow.name,
        description=workflow.description,
        purpose=workflow.purpose,
        contexts=tuple(ContextView(name=c.name, description=c.description) for c in _contexts(workflow)),
    )


def first_context(*, tenant_id: int) -> str:
    """Where a new session starts: the workflow's first context. NotFound without a workflow."""
    view = workflow_view(tenant_id=tenant_id)
    if not view.contexts:
        raise NotFound(NO_WORKFLOW)
    return view.contexts[0].name


def unknown_context(*, name: str, view: WorkflowView) -> InvalidInput:
    names = [c.name for c in view.contexts]
    return InvalidInput(
        UNKNOWN_CONTEXT.format(name=name[:70], contexts=", ".join(names) or "none"),
        data={"problem": "unknown_context", "context": name[:200], "contexts": names},
    )


def command_requirements(action: CommandAction) -> tuple[frozenset[str], str | None] | None:
    """The scopes running ``action`` needs and the toolset it needs enabled (None: none); None
    when it cannot run here at all (a tool this deployment does not serve)."""
    if action.kind == ActionKind.TOOL:
        registry = default_registry()
        spec = registry.get(action.tool_name)
        if spec is None:
            return None
        return spec.scopes, registry.toolset_of_tool(action.tool_name)
    if action.kind == ActionKind.QUERY:
        return QUERY_SCOPES, QUERY_TOOLSET
    return frozenset(), None


def _command_info(command: WorkflowCommand, *, context: str) -> CommandInfo | None:
    action = CommandAction(
        kind=command.action,
        tool_name=command.tool_name,
        tool_arguments=tuple(
            (str(k), str(v)) for k, v in (command.tool_arguments or {}).items() if isinstance(v, str)
        ),
        ontology_id=str(command.ontology_id) if command.ontology_id else None,
        sql=command.sql,
        builtin=command.builtin,
    )
    requirements = command_requirements(action)
    if requirements is None:
        return None
    return CommandInfo(
        qualified_name=f"{context}/{command.name}",
        description=command.description,
        parameters=tuple(
            ParameterInfo(
                name=str(p.get("name", "")),
                type=str(p.get("type", "string")),
                required=bool(p.get("required", False)),
                description=str(p.get("description", "")),
                default=p.get("default"),
            )
            for p in command.parameters or []
            if isinstance(p, dict)
        ),
        examples=tuple(str(e) for e in command.examples or []),
        scopes=requirements[0],
        action=action,
    )


def builtin_commands(*, context: str, view: WorkflowView) -> list[CommandInfo]:
    """The three commands every context has."""
    others = [c.name for c in view.contexts if c.name != context] or [context]
    return [
        CommandInfo(
            qualified_name=f"{context}/{Builtin.WHAT_IS_CURRENT_CONTEXT}",
            description="Say which context you are in and what it is for.",
            examples=(f"{context}/{Builtin.WHAT_IS_CURRENT_CONTEXT}",),
            action=CommandAction(kind=ActionKind.BUILTIN, builtin=Builtin.WHAT_IS_CURRENT_CONTEXT),
        ),
        CommandInfo(
            qualified_name=f"{context}/{Builtin.GO_TO_CONTEXT}",
            description="Move to another context; its commands become the current ones.",
            parameters=(
                ParameterInfo(
                    name="context",
                    type="string",
                    required=True,
                    description="The context to go to: " + ", ".join(c.name for c in view.contexts) + ".",
                ),
            ),
            examples=(f"{context}/{Builtin.GO_TO_CONTEXT} <context>{others[0]}</context>",),
            action=CommandAction(kind=ActionKind.BUILTIN, builtin=Builtin.GO_TO_CONTEXT),
        ),
        CommandInfo(
            qualified_name=f"{context}/{Builtin.LIST_COMMANDS}",
            description="List the commands of this context, with their parameters and examples.",
            examples=(f"{context}/{Builtin.LIST_COMMANDS}",),
            action=CommandAction(kind=ActionKind.BUILTIN, builtin=Builtin.LIST_COMMANDS),
        ),
    ]


def command_visible(
    command: CommandInfo, *, granted: frozenset[str], enabled_toolsets: frozenset[str]
) -> bool:
    if command.action is None:
        return True
    requirements = command_requirements(command.action)
    if requirements is None:
        return False
    scopes, toolset = requirements
    return scopes <= granted and (toolset is None or toolset in enabled_toolsets)


def commands_all(*, tenant_id: int, context: str | None) -> tuple[WorkflowView, list[CommandInfo]]:
    """Every command of ``context`` (all contexts when None) a caller could ever run, built-ins
    last in each context, whatever the caller's scopes: NotFound without a workflow, InvalidInput
    for an unknown context. A tool command whose tool this deployment does not serve is left out."""
    workflow = _workflow(tenant_id=tenant_id)
    contexts = _contexts(workflow)
    view = WorkflowView(
        tenant_id=tenant_id,
        name=workflow.name,
        description=workflow.description,
        purpose=workflow.purpose,
        contexts=tuple(ContextView(name=c.name, description=c.description) for c in contexts),
    )
    if context is not None:
        contexts = [c for c in contexts if c.name == context]
        if not contexts:
            raise unknown_context(name=context, view=view)
    by_context: dict[int, list[WorkflowCommand]] = {c.pk: [] for c in contexts}
    for command in WorkflowCommand.objects.filter(context__in=contexts).order_by("order", "name"):
        by_context[command.context_id].append(command)
    commands: list[CommandInfo] = []
    for ctx in contexts:
        infos = (_command_info(c, context=ctx.name) for c in by_context[ctx.pk])
        commands += [info for info in infos if info is not None]
        commands += builtin_commands(context=ctx.name, view=view)
    return view, commands


def commands_visible(
    *, tenant_id: int, context: str | None, granted: frozenset[str], enabled_toolsets: frozenset[str]
) -> list[CommandInfo]:
    """The commands of ``context`` (all contexts when None) this caller may run, in order, each
    context's built-ins after its own commands. NotFound without a workflow; InvalidInput
    (``data.problem == "unknown_context"``, with the contexts) for a context it does not have."""
    _, commands = commands_all(tenant_id=tenant_id, context=context)
    return [c for c in commands if command_visible(c, granted=granted, enabled_toolsets=enabled_toolsets)]


def expected_form(command: CommandInfo) -> str:
    """The command's syntax: required parameters as ``<name>type</name>``, optional ones in brackets."""
    parts = [command.qualified_name]
    for p in command.parameters:
        part = f"<{p.name}>{p.type}</{p.name}>"
        parts.append(part if p.required else f"[{part}]")
    return " ".join(parts)


def parameters_described(command: CommandInfo) -> list[dict[str, Any]]:
    return [
        {"name": p.name, "type": p.type, "required": p.required, "description": p.description}
        for p in command.parameters
    ]
