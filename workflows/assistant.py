"""The assistant turn's mapping: a request in words to exactly one command text, or a reason why not.

Deterministic first: without a model, a request already in command syntax, or naming one command
and its parameters without doubt, is mapped; anything else is refused with what could not be
mapped and the commands it looked closest to, because running a guess is worse than asking. With
a model, one structured-output call does the mapping, and its answer is checked as strictly as a
person's: an unknown command or parameter is a refusal, never a second call.

Only the mapping lives here; running the command text (and its validation) is the caller's.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.text_safety import text_cleaned, text_unstorable_reason
from language_models.governed import ModelUse, model_complete
from language_models.selectors import ModelConfig
from workflows.catalogue import CommandInfo
from workflows.command_text import CommandTextError, command_text_build
from workflows.syntax import COMMAND_MAX_CHARS, CommandSyntaxError, command_parse

PURPOSE = "workflow_assistant"
CLOSE_COMMANDS_MAX = 5
REASON_MAX_CHARS = 1_000
# Fuzzy matching is quadratic in the lengths it compares: a request's head is enough to rank names.
FUZZY_MAX_CHARS = 200

EMPTY_REQUEST = "The request is empty; name a command, for example {example}."
REQUEST_TOO_LONG = "The request is longer than {limit} characters."
REQUEST_UNSTORABLE = "The request {reason}."
NO_COMMAND_NAMED = "The request names no command of this context, and is not in the form {form}."
SEVERAL_COMMANDS = "The request could name several commands: {names}; give the full name (context/Name)."
MISSING_PARAMETERS = "{command} needs {names}; give them as name=value."
UNCLEAR_PARAMETERS = (
    "The words after {command} could not be matched to its parameters ({known}); use name=value."
)
NO_PARAMETERS = "{command} takes no parameters, but the request has more words after its name."
PARAMETER_TWICE = "The parameter {name} is given twice."
MODEL_BAD_ANSWER = "The language model's answer could not be used: {why}."
MODEL_NO_COMMAND = "The language model found no command for this request: {reason}"

SYSTEM_PROMPT = """You map one request to exactly one command of the workflow context "{context}".
Commands (name: description; parameters as name (type, required or optional)):
{catalogue}
Answer with one JSON object only:
{{"command": "context/Name", "parameters": {{"name": value}}}}
or, when no single command fits or a required parameter is missing from the request:
{{"command": null, "reason": "what is missing or unclear"}}
Never invent parameter values the request does not give."""


@dataclass
class AssistantMapping:
    command_text: str | None
    reason: str
    close_commands: list[str] = field(default_factory=list)


def assistant_map_plain(*, query: str, commands: Sequence[CommandInfo]) -> AssistantMapping:
    """Map ``query`` without a model: command syntax as is, or one command named with its parameters."""
    text, refusal = _request_text(query, commands)
    if refusal is not None:
        return refusal
    try:
        command_parse(text=text)
        return AssistantMapping(command_text=text, reason="The request is in command syntax.")
    except CommandSyntaxError:
        pass
    matches = _named_commands(text, commands)
    if not matches:
        return _refused(NO_COMMAND_NAMED.format(form="context/Name <param>value</param>"), text, commands)
    length = max(end for end, _ in matches)
    best = [command for end, command in matches if end == length]
    if len(best) > 1:
        names = [command.qualified_name for command in best][:CLOSE_COMMANDS_MAX]
        return AssistantMapping(None, SEVERAL_COMMANDS.format(names=", ".join(names)), names)
    command = best[0]
    arguments, problem = _arguments(text[length:], command)
    if problem is not None:
        return AssistantMapping(None, problem, [command.qualified_name])
    try:
        built = command_text_build(qualified_name=command.qualified_name, arguments=arguments)
    except CommandTextError as error:
        return AssistantMapping(None, str(error), [command.qualified_name])
    return AssistantMapping(command_text=built, reason=f"The request names {command.qualified_name}.")


async def assistant_map_with_model(
    *, use: ModelUse, config: ModelConfig, query: str, commands: Sequence[CommandInfo], context: str
) -> AssistantMapping:
    """Map ``query`` with one structured-output call to the tenant's model.

    The model's errors (``NotReady``, ``Unavailable``, ``Timeout``) propagate; an answer that is not
    the JSON asked for, or names a command or parameter that does not exist, is a refusal.
    """
    text, refusal = _request_text(query, commands)
    if refusal is not None:
        return refusal
    catalogue = "\n".join(_catalogue_line(command) for command in commands)
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT.format(context=context, catalogue=catalogue)},
        {"role": "user", "content": text},
    ]
    completion = await model_complete(
        use=use, config=config, messages=messages, purpose=PURPOSE, response_format={"type": "json_object"}
    )
    return _model_mapping(completion.text, text, commands)


def _model_mapping(answer: str, text: str, commands: Sequence[CommandInfo]) -> AssistantMapping:
    try:
        parsed = json.loads(_unfenced(answer))
    except (ValueError, RecursionError):
        return _refused(MODEL_BAD_ANSWER.format(why="it is not JSON"), text, commands)
    if not isinstance(parsed, dict) or "command" not in parsed:
        return _refused(MODEL_BAD_ANSWER.format(why='it is not an object with "command"'), text, commands)
    name = parsed["command"]
    if name is None:
        reason = parsed.get("reason")
        reason = text_cleaned(reason)[:REASON_MAX_CHARS] if isinstance(reason, str) else "no reason given"
        return _refused(MODEL_NO_COMMAND.format(reason=reason), text, commands)
    by_name = {command.qualified_name: command for command in commands}
    if not isinstance(name, str) or name not in by_name:
        shown = text_cleaned(name)[:80] if isinstance(name, str) else type(name).__name__
        return _refused(
            MODEL_BAD_ANSWER.format(why=f"it names no command of this context ({shown!r})"), text, commands
        )
    command = by_name[name]
    parameters = parsed.get("parameters") or {}
    if not isinstance(parameters, dict):
        return _refused(MODEL_BAD_ANSWER.format(why="its parameters are not an object"), text, commands)
    known = {parameter.name for parameter in command.parameters}
    unknown = sorted(text_cleaned(str(key))[:40] for key in parameters if key not in known)
    if unknown:
        why = f"{name} has no parameter {', '.join(unknown)}"
        return AssistantMapping(None, MODEL_BAD_ANSWER.format(why=why), [name])
    try:
        built = command_text_build(qualified_name=name, arguments=parameters)
    except CommandTextError as error:
        return AssistantMapping(None, str(error), [name])
    return AssistantMapping(command_text=built, reason=f"The language model chose {name}.")


def _request_text(query: str, commands: Sequence[CommandInfo]) -> tuple[str, AssistantMapping | None]:
    """The request without a leading "/" and spaces, or the refusal of one that cannot be mapped."""
    if len(query) > COMMAND_MAX_CHARS:
        return "", AssistantMapping(None, REQUEST_TOO_LONG.format(limit=COMMAND_MAX_CHARS), [])
    unstorable = text_unstorable_reason(query)
    if unstorable is not None:
        return "", AssistantMapping(None, REQUEST_UNSTORABLE.format(reason=unstorable), [])
    text = query.strip()
    if text.startswith("/"):
        text = text[1:].strip()
    if not text:
        example = commands[0].qualified_name if commands else "context/Name"
        names = [command.qualified_name for command in commands][:CLOSE_COMMANDS_MAX]
        return "", AssistantMapping(None, EMPTY_REQUEST.format(example=example), names)
    return text, None


def _words(name: str) -> list[str]:
    """A command name's words: ``ListProducts``, ``list_products`` and ``listProducts`` alike."""
    return [word.lower() for word in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", name)]


def _named_commands(text: str, commands: Sequence[CommandInfo]) -> list[tuple[int, CommandInfo]]:
    """The commands whose name starts ``text``, each with where its name ends."""
    matches = []
    for command in commands:
        context, _, name = command.qualified_name.partition("/")
        words = _words(name)
        if not words:
            continue
        # The context is optional; the name's words may be run together or split by spaces or "_".
        pattern = (
            rf"(?:{re.escape(context)}\s*/\s*)?"
            + r"[\s_]*".join(re.escape(word) for word in words)
            + r"(?=$|[\s:,;])"
        )
        match = re.match(pattern, text, re.IGNORECASE)
        if match is not None:
            matches.append((match.end(), command))
    return matches


def _arguments(rest: str, command: CommandInfo) -> tuple[dict[str, str], str | None]:
    """The parameters given after the command's name, or why they cannot be told apart."""
    rest = rest.strip().lstrip(":,;").strip()
    parameters = {parameter.name.lower(): parameter for parameter in command.parameters}
    known = ", ".join(parameters) or "none"
    arguments: dict[str, str] = {}
    if rest:
        keys = list(_parameter_keys(rest, set(parameters)))
        if keys:
            if rest[: keys[0][0]].strip(" ,;"):
                return {}, UNCLEAR_PARAMETERS.format(command=command.qualified_name, known=known)
            for index, (_, end, key) in enumerate(keys):
                stop = keys[index + 1][0] if index + 1 < len(keys) else len(rest)
                name = parameters[key].name
                if name in arguments:
                    return {}, PARAMETER_TWICE.format(name=name)
                arguments[name] = _unquoted(rest[end:stop].strip().rstrip(",;").strip())
        else:
            if not command.parameters:
                return {}, NO_PARAMETERS.format(command=command.qualified_name)
            required = [parameter for parameter in command.parameters if parameter.required]
            candidates = required if required else list(command.parameters)
            if len(candidates) != 1:
                return {}, UNCLEAR_PARAMETERS.format(command=command.qualified_name, known=known)
            arguments[candidates[0].name] = _unquoted(rest)
    missing = [p.name for p in command.parameters if p.required and not arguments.get(p.name, "").strip()]
    if missing:
        return {}, MISSING_PARAMETERS.format(command=command.qualified_name, names=", ".join(missing))
    return arguments, None


def _parameter_keys(rest: str, names: set[str]) -> list[tuple[int, int, str]]:
    """Where each ``name=`` or ``name:`` of a known parameter starts and its value begins."""
    keys = []
    for match in re.finditer(r"(?:^|(?<=[\s,;]))([A-Za-z][A-Za-z0-9_]*)\s*[=:]\s*", rest):
        if match.group(1).lower() in names:
            keys.append((match.start(), match.end(), match.group(1).lower()))
    return keys


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _unfenced(answer: str) -> str:
    """A JSON answer without the Markdown fence some models wrap it in."""
    fenced = re.fullmatch(r"\s*```(?:json)?\s*(.*?)\s*```\s*", answer, re.DOTALL)
    return fenced.group(1) if fenced else answer


def _refused(reason: str, text: str, commands: Sequence[CommandInfo]) -> AssistantMapping:
    return AssistantMapping(None, reason, assistant_close_commands(text=text, commands=commands))


def assistant_close_commands(*, text: str, commands: Sequence[CommandInfo]) -> list[str]:
    """Up to five commands whose names or descriptions look like ``text``, closest first."""
    head = text[:FUZZY_MAX_CHARS].lower()
    scored: list[tuple[float, str]] = []
    for command in commands:
        name = command.qualified_name.partition("/")[2]
        forms = [command.qualified_name.lower(), name.lower(), " ".join(_words(name))]
        score = max(difflib.SequenceMatcher(None, head, form).ratio() for form in forms)
        description = command.description[:FUZZY_MAX_CHARS].lower()
        if description:
            score = max(score, difflib.SequenceMatcher(None, head, description).ratio())
        if score >= 0.4:
            scored.append((score, command.qualified_name))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [name for _, name in scored[:CLOSE_COMMANDS_MAX]]


def _catalogue_line(command: CommandInfo) -> str:
    parameters = ", ".join(
        f"{p.name} ({p.type}, {'required' if p.required else 'optional'})" for p in command.parameters
    )
    return f"- {command.qualified_name}: {command.description[:300]}" + (
        f" [{parameters}]" if parameters else ""
    )
