"""A call to an OpenAPI upstream's tool: one HTTP request built from the tool's stored description
of it, and the answer as an MCP tool result.

The request. Path parameters are percent-encoded whole (a ``/`` in a value is ``%2F``, never a
new segment), and a value of ``.`` or ``..`` is refused, since a client or server normalising the
path would climb out of the operation's own. Query parameters follow their style (``form``, as
repeated keys or comma-joined; ``deepObject``); header parameters must be printable ASCII. A body is
sent as JSON. Credentials are applied last (``auth``), so no argument can replace them. The request
goes through the upstreams' egress-checked client with the upstream's timeouts, redirects not
followed, and the answer is read no further than ``MAX_RESPONSE_BYTES``.

The result. A 2xx JSON answer is ``structuredContent`` (an object as it is; any other JSON value
wrapped as ``{"result": value}``, since structured content is an object) and the same JSON as
text. Other 2xx answers are text (bounded; bytes that are not text are described, not passed on).
Any other status is a tool error (``isError``) giving the status and the start of the body. A tool
error is also the answer to arguments that cannot be sent (a path value of ``..``): the caller's
mistake, said in a sentence, not the upstream failing.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx2

from upstreams.config import UpstreamConfig
from upstreams.egress import upstream_http_client
from upstreams.openapi.auth import openapi_credentials

MAX_RESPONSE_BYTES = 2 * 1024 * 1024
MAX_ERROR_EXCERPT = 500
ACCEPT = "application/json, */*;q=0.5"
TEXT_TYPES = ("text/", "application/xml", "application/yaml", "application/x-yaml")

UNKNOWN_TOOL = "This tool is no longer served; list the tools again."
PATH_VALUE_REFUSED = "Argument {argument!r}: a path value cannot be empty, '.' or '..'."
PATH_VALUE_OBJECT = "Argument {argument!r}: a path value must be a string, a number or a list of them."
HEADER_VALUE_REFUSED = "Argument {argument!r}: a header value must be printable ASCII on one line."
TOO_LARGE = (
    f"The API's answer is larger than {MAX_RESPONSE_BYTES // (1024 * 1024)} MB; Gatehouse stopped reading it."
)
HTTP_ERROR = "The API answered HTTP {status}{excerpt}"
NO_CONTENT = "The API answered HTTP {status}, with no content."
REQUEST_FAILED = "the request failed ({kind})"
NOT_TEXT = "The API answered {size} bytes of {media_type}, which Gatehouse does not pass on as text."


class ArgumentRefused(Exception):
    """Arguments that cannot make a request: answered as a tool error with this sentence."""


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, int | float | str):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _path_value(argument: str, value: Any) -> str:
    if isinstance(value, dict):
        raise ArgumentRefused(PATH_VALUE_OBJECT.format(argument=argument[:60]))
    items = value if isinstance(value, list) else [value]
    if any(isinstance(item, dict | list) for item in items):
        raise ArgumentRefused(PATH_VALUE_OBJECT.format(argument=argument[:60]))
    texts = [_scalar(item) for item in items]
    if any(text in ("", ".", "..") for text in texts):
        raise ArgumentRefused(PATH_VALUE_REFUSED.format(argument=argument[:60]))
    # Each item encoded whole, safe="" so that "/" and "%" are encoded too.
    return ",".join(quote(text, safe="") for text in texts)


def _query_pairs(parameter: dict[str, Any], value: Any) -> list[tuple[str, str]]:
    name, style, explode = parameter["name"], parameter.get("style", "form"), parameter.get("explode", True)
    if isinstance(value, dict):
        if style == "deepObject":
            return [(f"{name}[{key}]", _scalar(item)) for key, item in value.items()]
        if explode:
            return [(str(key), _scalar(item)) for key, item in value.items()]
        return [(name, ",".join(f"{key},{_scalar(item)}" for key, item in value.items()))]
    if isinstance(value, list):
        if explode:
            return [(name, _scalar(item)) for item in value]
        separator = {"spaceDelimited": " ", "pipeDelimited": "|"}.get(style, ",")
        return [(name, separator.join(_scalar(item) for item in value))]
    return [(name, _scalar(value))]


def _header_value(argument: str, value: Any) -> str:
    text = ",".join(_scalar(item) for item in value) if isinstance(value, list) else _scalar(value)
    if not text.isascii() or not text.isprintable():
        raise ArgumentRefused(HEADER_VALUE_REFUSED.format(argument=argument[:60]))
    return text


def openapi_request_parts(
    call: dict[str, Any], arguments: dict[str, Any]
) -> tuple[str, list[tuple[str, str]], dict[str, str], bytes | None]:
    """The path (encoded), query pairs, headers and body a call with ``arguments`` sends."""
    path = str(call["path"])
    query: list[tuple[str, str]] = []
    headers: dict[str, str] = {}
    for parameter in call.get("parameters") or ():
        argument = parameter["argument"]
        if argument not in arguments or arguments[argument] is None:
            continue
        value = arguments[argument]
        if parameter["in"] == "path":
            path = path.replace("{" + parameter["name"] + "}", _path_value(argument, value))
        elif parameter["in"] == "query":
            query.extend(_query_pairs(parameter, value))
        elif parameter["in"] == "header":
            headers[parameter["name"]] = _header_value(argument, value)
    body = None
    spec = call.get("body")
    if spec is not None and spec["argument"] in arguments:
        body = json.dumps(arguments[spec["argument"]], ensure_ascii=False).encode()
        headers["Content-Type"] = str(spec["contentType"])
    return path, query, headers, body


def _tool(config: UpstreamConfig, name: str) -> dict[str, Any] | None:
    return next((tool for tool in config.openapi_tools if tool.get("name") == name), None)


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


async def _read(response: httpx2.Response) -> bytes | None:
    """The body, or None when it is larger than the cap (not read further)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _text_of(content: bytes, charset: str | None) -> str:
    try:
        return content.decode(charset or "utf-8", errors="replace")
    except LookupError:
        # A charset Python does not know: read as UTF-8.
        return content.decode("utf-8", errors="replace")


def _answer(text: str, structured: dict[str, Any] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if structured is not None:
        result["structuredContent"] = structured
    return result


def _result(status: int, media_type: str, charset: str | None, content: bytes) -> dict[str, Any]:
    text = _text_of(content, charset)
    if not 200 <= status < 300:
        excerpt = " ".join(text.split())[:MAX_ERROR_EXCERPT]
        return _error(HTTP_ERROR.format(status=status, excerpt=f": {excerpt}" if excerpt else "."))
    if not content:
        return _answer(NO_CONTENT.format(status=status))
    is_json = "json" in media_type
    if is_json:
        try:
            value = json.loads(text)
        except ValueError:
            # Said to be JSON and is not: passed on as the text it is.
            return _answer(text)
        return _answer(
            json.dumps(value, ensure_ascii=False), value if isinstance(value, dict) else {"result": value}
        )
    if not media_type or media_type.startswith(TEXT_TYPES):
        return _answer(text)
    return _answer(NOT_TEXT.format(size=len(content), media_type=ascii(media_type[:80])))


async def _sent(client: httpx2.AsyncClient, request: httpx2.Request) -> httpx2.Response:
    """``request`` sent; a failure raised again without httpx's message, which may quote the URL
    and so the API key in its query (its cause is kept, for the egress refusal it may hold)."""
    try:
        return await client.send(request, stream=True)
    except httpx2.ConnectTimeout as error:
        raise ConnectionError(REQUEST_FAILED.format(kind=type(error).__name__)) from error
    except httpx2.TimeoutException:
        raise TimeoutError from None
    except httpx2.HTTPError as error:
        raise ConnectionError(REQUEST_FAILED.format(kind=type(error).__name__)) from error


async def openapi_call(*, config: UpstreamConfig, tool_name: str, arguments: Any) -> dict[str, Any]:
    """Call ``config``'s operation behind the tool named ``tool_name`` (its own name, unprefixed)
    with ``arguments`` (already checked against its input schema); the MCP tool result. Network
    failures raise (``ConnectionError``, with an ``EgressRefused`` as its cause when that was
    why; ``TimeoutError``; ``OpenApiOAuthError``) for the federation to report as the
    upstream's."""
    tool = _tool(config, tool_name)
    if tool is None:
        return _error(UNKNOWN_TOOL)
    call = tool["call"]
    try:
        path, query, headers, body = openapi_request_parts(
            call, arguments if isinstance(arguments, dict) else {}
        )
    except ArgumentRefused as refused:
        return _error(str(refused))
    url = config.url.rstrip("/") + path
    timeout = httpx2.Timeout(config.call_timeout, connect=config.connect_timeout)
    refused_token: str | None = None
    async with upstream_http_client(timeout=timeout) as client:
        for attempt in range(2):
            auth_headers, auth_query, token = await openapi_credentials(config=config, refused=refused_token)
            request = client.build_request(
                str(call["method"]),
                url,
                params=[*query, *auth_query],
                headers={"Accept": ACCEPT, **headers, **auth_headers},
                content=body,
            )
            response = await _sent(client, request)
            try:
                if response.status_code == 401 and token is not None and attempt == 0:
                    # The API forgot the token (a restart): one more try with a new one.
                    refused_token = token
                    continue
                content = await _read(response)
            finally:
                await response.aclose()
            if content is None:
                return _error(TOO_LARGE)
            media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
            return _result(response.status_code, media_type, response.charset_encoding, content)
    raise AssertionError("unreachable")
