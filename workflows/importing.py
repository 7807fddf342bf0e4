"""Reading a workflow file: every problem found with its line, and nothing written unless all is valid.

The file is parsed event by event first, so aliases (billion laughs) and deep nesting are refused
before anything is built; then composed into nodes, whose start marks give each error its line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from workflows import rules, syntax
from workflows.models import ActionKind, Builtin

SOURCE_MAX_CHARS = 512_000
DEPTH_MAX = 12
WORKFLOW_KEYS = frozenset({"name", "description", "purpose", "contexts"})
CONTEXT_KEYS = frozenset({"name", "description", "commands"})
COMMAND_KEYS = frozenset({"name", "description", "parameters", "examples", "tool", "query", "builtin"})
TOOL_KEYS = frozenset({"name", "arguments"})
QUERY_KEYS = frozenset({"ontology", "sql"})


@dataclass(frozen=True)
class ImportProblem:
    line: int
    message: str


@dataclass
class CommandSpec:
    name: str
    description: str
    parameters: list[dict[str, Any]]
    examples: list[str]
    action: str
    tool_name: str = ""
    tool_arguments: dict[str, str] = field(default_factory=dict)
    ontology: str = ""
    sql: str = ""
    builtin: str = ""
    line: int = 0
    sql_line: int = 0


@dataclass
class ContextSpec:
    name: str
    description: str
    commands: list[CommandSpec]


@dataclass
class WorkflowSpec:
    name: str
    description: str
    purpose: str
    contexts: list[ContextSpec]


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _structure_problems(source: str) -> list[ImportProblem]:
    """Size, characters, syntax, aliases and depth: what makes composing unsafe or impossible."""
    if len(source) > SOURCE_MAX_CHARS:
        return [ImportProblem(1, f"The file is longer than {SOURCE_MAX_CHARS} characters.")]
    depth = 0
    try:
        for event in yaml.parse(source, Loader=yaml.SafeLoader):
            line = event.start_mark.line + 1 if event.start_mark else 1
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                return [ImportProblem(line, "Anchors and aliases are not allowed.")]
            # Only plain YAML: an explicit tag (!!python/object, !custom) could mean anything.
            if getattr(event, "tag", None) is not None:
                return [ImportProblem(line, "Tags (!...) are not allowed.")]
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > DEPTH_MAX:
                    return [ImportProblem(line, f"Nested deeper than {DEPTH_MAX} levels.")]
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.reader.ReaderError as exc:
        line = source[: exc.position].count("\n") + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return [ImportProblem(line, f"The character U+{code:04X} is not allowed in a YAML file.")]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        return [ImportProblem(line, f"YAML syntax error: {exc.problem or exc.context}.")]
    return []


def _usable_parameters(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [
        {**item, "type": item.get("type") if item.get("type") in syntax.PARAMETER_TYPES else "string"}
        for item in value
        if isinstance(item, dict) and isinstance(item.get("name"), str)
    ]


class _Reader:
    """Walks composed nodes into specs, collecting every problem rather than stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[ImportProblem] = []

    def fail(self, node: yaml.Node, message: str) -> None:
        self.problems.append(ImportProblem(_line(node), message))

    def mapping(self, node: yaml.Node, what: str, keys: frozenset[str]) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, f"{what} must be a mapping.")
            return {}
        found: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key not in keys:
                self.fail(
                    key_node,
                    f"Unknown key {str(key)[:70]!r} in {what}; expected one of {', '.join(sorted(keys))}.",
                )
            elif key in found:
                self.fail(key_node, f"The key {key!r} is given twice in {what}.")
            else:
                found[key] = value_node
        return found

    def sequence(self, node: yaml.Node | None, what: str) -> list[yaml.Node]:
        if node is None:
            return []
        if not isinstance(node, yaml.SequenceNode):
            self.fail(node, f"{what} must be a list.")
            return []
        return list(node.value)

    def data(self, node: yaml.Node | None, default: Any) -> Any:
        return default if node is None else yaml.SafeLoader(" ").construct_object(node, deep=True)

    def text(self, values: dict[str, yaml.Node], key: str, what: str, *, title: bool = False) -> str:
        node = values.get(key)
        if node is None:
            return ""
        value = self.data(node, "")
        checks = rules.title_errors(value) if title else rules.text_errors(value)
        for message in checks:
            self.fail(node, f"{what} {key} {message}.")
        return value if isinstance(value, str) else ""

    def named(self, values: dict[str, yaml.Node], parent: yaml.Node, what: str, check: Any) -> str:
        node = values.get("name")
        if node is None:
            self.fail(parent, f"{what} needs a name.")
            return ""
        value = self.data(node, "")
        for message in check(value):
            self.fail(node, f"{what} name {message}.")
        return value if isinstance(value, str) else ""

    def workflow(self, root: yaml.Node) -> WorkflowSpec:
        values = self.mapping(root, "the workflow", WORKFLOW_KEYS)
        if "name" not in values:
            self.fail(root, "The workflow needs a name.")
        spec = WorkflowSpec(
            name=self.text(values, "name", "the workflow", title=True),
            description=self.text(values, "description", "the workflow"),
            purpose=self.text(values, "purpose", "the workflow"),
            contexts=[],
        )
        seen: dict[str, int] = {}
        for node in self.sequence(values.get("contexts"), "contexts"):
            context = self.context(node)
            if context.name in seen:
                self.fail(
                    node, f"The context {context.name} is already defined on line {seen[context.name]}."
                )
            seen.setdefault(context.name, _line(node))
            spec.contexts.append(context)
        if not spec.contexts and "contexts" in values:
            self.fail(values["contexts"], "A workflow needs at least one context.")
        elif "contexts" not in values:
            self.fail(root, "A workflow needs at least one context.")
        return spec

    def context(self, node: yaml.Node) -> ContextSpec:
        values = self.mapping(node, "a context", CONTEXT_KEYS)
        name = self.named(values, node, "The context", rules.context_name_errors)
        context = ContextSpec(
            name=name, description=self.text(values, "description", f"context {name}"), commands=[]
        )
        seen: dict[str, int] = {}
        for command_node in self.sequence(values.get("commands"), f"the commands of {name}"):
            command = self.command(command_node, context=name)
            if command.name in seen:
                self.fail(
                    command_node,
                    f"The command {name}/{command.name} is already defined on line {seen[command.name]}.",
                )
            seen.setdefault(command.name, _line(command_node))
            context.commands.append(command)
        return context

    def command(self, node: yaml.Node, *, context: str) -> CommandSpec:
        values = self.mapping(node, "a command", COMMAND_KEYS)
        name = self.named(values, node, "The command", rules.command_name_errors)
        qualified = f"{context}/{name}"
        parameters = self.data(values.get("parameters"), [])
        problems = rules.parameters_errors(parameters)
        for message in problems:
            self.fail(values["parameters"], f"{qualified}: {message}.")
        if problems:
            # Check the rest against what the parameters seem to mean, so one typo is one error.
            parameters = _usable_parameters(parameters)
        examples = self.data(values.get("examples"), [])
        if not isinstance(examples, list):
            self.fail(values["examples"], f"{qualified}: examples must be a list.")
            examples = []
        for index, example in enumerate(examples):
            for message in rules.example_errors(example, qualified_name=qualified, parameters=parameters):
                self.fail(values["examples"].value[index], f"{qualified}: {message}.")
        if len(examples) > rules.EXAMPLES_MAX:
            self.fail(values["examples"], f"{qualified}: at most {rules.EXAMPLES_MAX} examples.")
        command = CommandSpec(
            name=name,
            description=self.text(values, "description", qualified),
            parameters=parameters,
            examples=examples,
            action="",
            line=_line(node),
        )
        actions = [key for key in ("tool", "query", "builtin") if key in values]
        if len(actions) != 1:
            self.fail(node, f"{qualified} needs exactly one of tool, query or builtin.")
            return command
        command.action = actions[0]
        action_node = values[command.action]
        if command.action == ActionKind.TOOL:
            tool = self.mapping(action_node, f"the tool of {qualified}", TOOL_KEYS)
            command.tool_name = self.data(tool.get("name"), "")
            for message in rules.tool_name_errors(command.tool_name):
                self.fail(tool.get("name", action_node), f"{qualified}: {message}.")
            command.tool_arguments = self.data(tool.get("arguments"), {})
            for message in rules.tool_arguments_errors(command.tool_arguments, parameters=parameters):
                self.fail(tool.get("arguments", action_node), f"{qualified}: {message}.")
        elif command.action == ActionKind.QUERY:
            query = self.mapping(action_node, f"the query of {qualified}", QUERY_KEYS)
            command.ontology = self.data(query.get("ontology"), "")
            if not isinstance(command.ontology, str) or not command.ontology:
                self.fail(query.get("ontology", action_node), f"{qualified}: the query names its ontology.")
                command.ontology = ""
            command.sql = self.data(query.get("sql"), "")
            command.sql_line = _line(query.get("sql", action_node))
            for message in rules.sql_errors(command.sql, parameters=parameters):
                self.fail(query.get("sql", action_node), f"{qualified}: {message}.")
        else:
            command.builtin = self.data(action_node, "")
            if command.builtin not in Builtin.values:
                self.fail(action_node, f"{qualified}: builtin must be one of {', '.join(Builtin.values)}.")
        return command


def workflow_parse(*, source: str) -> tuple[WorkflowSpec | None, list[ImportProblem]]:
    """The file's workflow, or None and every problem found, each with its line."""
    problems = _structure_problems(source)
    if problems:
        return None, problems
    root = yaml.compose(source, Loader=yaml.SafeLoader)
    if root is None:
        return None, [ImportProblem(1, "The file is empty.")]
    reader = _Reader()
    spec = reader.workflow(root)
    problems = sorted(reader.problems, key=lambda p: p.line)
    return (None, problems) if problems else (spec, [])
