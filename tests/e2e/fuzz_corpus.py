"""The fuzz corpus: malformed bodies, headers and parameters for every endpoint a stranger can reach.

A fixed corpus, built here from a handful of hostile values crossed with each endpoint's parameters,
so a failure replays exactly. The hostile values are the ones that broke endpoints before (issue 13):
NUL, invalid UTF-8, unpaired surrogates, deep and huge JSON, wrong types, odd ids, repeated fields.

Each case names the endpoint ``kind`` whose error shape its answer must have; ``test_fuzz`` checks
the shape, that nothing answers 5xx and that nothing takes longer than five seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

Kind = str  # "mcp", "oauth_json", "authorize", "login", "raw"


@dataclass(frozen=True)
class Case:
    name: str
    kind: Kind
    method: str
    path: str
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # For /mcp: send the bearer token and session of the test's own person.
    authenticated: bool = True
    with_session: bool = True


DEEP = 10_000
# A long value in a URL or header, under the 16 KiB line Twisted reads at most (a longer line is
# dropped by Daphne's HTTP layer before Gatehouse sees it: RAW_REQUESTS covers that).
URL_VALUE_CHARS = 8_000

# Strings as they travel in a query string or form body (already percent-encoded).
HOSTILE_FORM_VALUES: dict[str, str] = {
    "nul": "a%00b",
    "bare_nul": "%00",
    "invalid_utf8": "a%ffb",
    "overlong_utf8": "%c0%af",
    "lone_surrogate_utf8": "%ed%a0%80",
    "huge": "x" * 200_000,
    "crlf": "a%0d%0aSet-Cookie:%20x=1",
    "empty": "",
}

# Values as they travel inside JSON (raw JSON text, spliced in place of a value).
HOSTILE_JSON_VALUES: dict[str, str] = {
    "nul": json.dumps("a\x00b"),
    "lone_surrogate": '"\\ud800"',
    "huge_string": json.dumps("x" * 600_000),
    "number": "1e999",
    "nan": "NaN",
    "null": "null",
    "object": '{"a": {"b": []}}',
    "array": "[1, 2, 3]",
    "deep_array": "[" * DEEP + "]" * DEEP,
    "deep_object": '{"a":' * DEEP + "1" + "}" * DEEP,
    "bool": "true",
}

RAW_BODIES: dict[str, bytes] = {
    "empty": b"",
    "truncated": b'{"jsonrpc": "2.0", "id": 1, "method": "ping"',
    "nul_byte": b"\x00",
    "invalid_utf8": b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}',
    "utf16_bom": b"\xff\xfe{\x00}\x00",
    "deep_array": b"[" * DEEP + b"]" * DEEP,
    "very_deep_array": b"[" * 200_000,
    "deep_object": b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    "scalar": b"42",
    "string": b'"ping"',
    "null": b"null",
    "empty_array": b"[]",
    "empty_object": b"{}",
    "nan": b"NaN",
    "garbage": bytes(range(256)),
}


def _json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _rpc(method: str, params_json: str = "{}", request_id: str = "7") -> bytes:
    """A request as raw JSON text, so ids and params can be spliced in as text JSON cannot hold."""
    head = f'{{"jsonrpc": "2.0", "id": {request_id}, "method": {json.dumps(method)}'
    return f'{head}, "params": {params_json}}}'.encode()


def _tool_call(name: str, arguments_json: str) -> bytes:
    return _rpc("tools/call", f'{{"name": {json.dumps(name)}, "arguments": {arguments_json}}}')


MCP_TOOLS_AND_ARGUMENTS = {
    "whoami": ["x"],
    "set_display_name": ["display_name"],
    "run_query": ["sql", "ontology"],
    "ask_question": ["question", "ontology"],
    "set_data_preferences": ["preferences"],
    "get_data_preferences": [],
}


def _mcp_cases() -> Iterator[Case]:
    for name, body in RAW_BODIES.items():
        yield Case(f"mcp body {name}", "mcp", "POST", "/mcp", body)
    for name, value in HOSTILE_JSON_VALUES.items():
        yield Case(f"mcp id {name}", "mcp", "POST", "/mcp", _rpc("ping", request_id=value))
        yield Case(
            f"mcp method {name}",
            "mcp",
            "POST",
            "/mcp",
            _rpc("x", request_id="1").replace(b'"x"', value.encode()),
        )
        yield Case(f"mcp params {name}", "mcp", "POST", "/mcp", _rpc("tools/list", params_json=value))
        yield Case(
            f"mcp initialize clientInfo.name {name}",
            "mcp",
            "POST",
            "/mcp",
            _rpc(
                "initialize",
                '{"protocolVersion": "2025-11-25", "capabilities": {}, '
                f'"clientInfo": {{"name": {value}, "version": "1"}}}}',
            ),
            with_session=False,
        )
        yield Case(
            f"mcp initialize capabilities.experimental {name}",
            "mcp",
            "POST",
            "/mcp",
            _rpc(
                "initialize",
                f'{{"protocolVersion": "2025-11-25", "capabilities": {{"experimental": {{"x": {value}}}}}, '
                '"clientInfo": {"name": "fuzz", "version": "1"}}',
            ),
            with_session=False,
        )
        yield Case(
            f"mcp setLevel {name}", "mcp", "POST", "/mcp", _rpc("logging/setLevel", f'{{"level": {value}}}')
        )
        yield Case(
            f"mcp resources/read {name}", "mcp", "POST", "/mcp", _rpc("resources/read", f'{{"uri": {value}}}')
        )
        for tool, arguments in MCP_TOOLS_AND_ARGUMENTS.items():
            for argument in arguments:
                yield Case(
                    f"mcp {tool}.{argument} {name}",
                    "mcp",
                    "POST",
                    "/mcp",
                    _tool_call(tool, f"{{{json.dumps(argument)}: {value}}}"),
                )
        yield Case(
            f"mcp tool name {name}",
            "mcp",
            "POST",
            "/mcp",
            _tool_call("x", "{}").replace(b'"x"', value.encode()),
        )
    yield Case(
        "mcp huge body", "mcp", "POST", "/mcp", _tool_call("whoami", json.dumps({"x": "y" * 6_000_000}))
    )
    yield Case("mcp batch of 1000", "mcp", "POST", "/mcp", b"[" + b",".join([_rpc("ping")] * 1000) + b"]")
    yield Case("mcp jsonrpc 1.0", "mcp", "POST", "/mcp", _rpc("ping").replace(b'"2.0"', b'"1.0"'))
    yield Case("mcp id huge int", "mcp", "POST", "/mcp", _rpc("ping", request_id=str(2**200)))
    yield Case(
        "mcp id huge string", "mcp", "POST", "/mcp", _rpc("ping", request_id=json.dumps("i" * 100_000))
    )
    yield Case("mcp setLevel nope", "mcp", "POST", "/mcp", _rpc("logging/setLevel", '{"level": "nope"}'))
    yield Case(
        "mcp experimental not an object",
        "mcp",
        "POST",
        "/mcp",
        _rpc(
            "initialize",
            '{"protocolVersion": "2025-11-25", "capabilities": {"experimental": 5}, '
            '"clientInfo": {"name": "f", "version": "1"}}',
        ),
        with_session=False,
    )

    ping = _rpc("ping")
    header_cases = {
        "no content type": {"content-type": ""},
        "text content type": {"content-type": "text/plain"},
        "garbage content type": {"content-type": "a/b; charset=nope"},
        "no accept": {"accept": ""},
        "garbage accept": {"accept": "x/y"},
        "garbage session": {"mcp-session-id": "not-a-session"},
        "huge session": {"mcp-session-id": "s" * 8000},
        "foreign session": {"mcp-session-id": "0" * 32},
        "garbage protocol version": {"mcp-protocol-version": "9999-99-99"},
        "huge protocol version": {"mcp-protocol-version": "v" * 8000},
        "evil origin": {"origin": "https://evil.example"},
        "null origin": {"origin": "null"},
        "garbage host": {"host": "evil.example"},
        "host with userinfo": {"host": "user@127.0.0.1"},
        "bearer empty": {"authorization": "Bearer"},
        "bearer garbage": {"authorization": "Bearer garbage"},
        "bearer huge": {"authorization": "Bearer " + "t" * URL_VALUE_CHARS},
        "basic auth": {"authorization": "Basic YTpi"},
        "bearer lowercase twice": {"authorization": "bearer a b"},
    }
    for name, headers in header_cases.items():
        yield Case(f"mcp header {name}", "mcp", "POST", "/mcp", ping, headers=headers)
    yield Case("mcp no token", "mcp", "POST", "/mcp", ping, authenticated=False)
    yield Case(
        "mcp GET garbage session",
        "mcp",
        "GET",
        "/mcp",
        None,
        headers={"mcp-session-id": "x", "accept": "text/event-stream"},
    )
    yield Case("mcp DELETE garbage session", "mcp", "DELETE", "/mcp", None, headers={"mcp-session-id": "x"})
    yield Case("mcp PUT", "mcp", "PUT", "/mcp", ping)
    yield Case("mcp PATCH", "mcp", "PATCH", "/mcp", ping)
    yield Case("mcp query string nul", "mcp", "POST", "/mcp?x=%00&y=%ff", ping)


TOKEN_PARAMETERS = [
    "grant_type",
    "code",
    "client_id",
    "redirect_uri",
    "code_verifier",
    "refresh_token",
    "resource",
    "scope",
]
AUTHORIZE_PARAMETERS = [
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
    "resource",
]
REGISTRATION_FIELDS = [
    "client_name",
    "redirect_uris",
    "grant_types",
    "response_types",
    "token_endpoint_auth_method",
    "scope",
    "client_uri",
    "logo_uri",
]

FORM = {"content-type": "application/x-www-form-urlencoded"}


def _form(values: dict[str, str]) -> bytes:
    return "&".join(f"{key}={value}" for key, value in values.items()).encode()


def _oauth_cases() -> Iterator[Case]:
    token_base = {
        "grant_type": "authorization_code",
        "code": "abc",
        "client_id": "nope",
        "redirect_uri": quote("http://127.0.0.1:9/cb", safe=""),
        "code_verifier": "v" * 50,
    }
    for parameter in TOKEN_PARAMETERS:
        for name, value in HOSTILE_FORM_VALUES.items():
            body = _form({**token_base, parameter: value})
            yield Case(f"token {parameter} {name}", "oauth_json", "POST", "/oauth/token/", body, headers=FORM)
            if parameter in ("client_id", "refresh_token"):
                refresh = _form(
                    {
                        "grant_type": "refresh_token",
                        "client_id": "nope",
                        "refresh_token": "r",
                        parameter: value,
                    }
                )
                yield Case(
                    f"token refresh {parameter} {name}",
                    "oauth_json",
                    "POST",
                    "/oauth/token/",
                    refresh,
                    headers=FORM,
                )
    for name, value in HOSTILE_FORM_VALUES.items():
        yield Case(
            f"revoke token {name}",
            "oauth_json",
            "POST",
            "/oauth/revoke/",
            _form({"token": value, "client_id": "nope"}),
            headers=FORM,
        )
        yield Case(
            f"revoke client_id {name}",
            "oauth_json",
            "POST",
            "/oauth/revoke/",
            _form({"token": "t", "client_id": value}),
            headers=FORM,
        )
    for name, body in RAW_BODIES.items():
        yield Case(f"token raw body {name}", "oauth_json", "POST", "/oauth/token/", body, headers=FORM)
        yield Case(
            f"register raw body {name}",
            "oauth_json",
            "POST",
            "/oauth/register/",
            body,
            headers={"content-type": "application/json"},
        )
    # Past Django's DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB): refused before any field is read.
    oversize = _form({**token_base, "code": "c" * 3_000_000})
    yield Case("token oversize body", "oauth_json", "POST", "/oauth/token/", oversize, headers=FORM)
    many_fields = b"&".join(b"f%d=1" % n for n in range(5000))
    yield Case("token too many fields", "oauth_json", "POST", "/oauth/token/", many_fields, headers=FORM)
    yield Case("revoke oversize body", "oauth_json", "POST", "/oauth/revoke/", oversize, headers=FORM)
    yield Case(
        "token json body",
        "oauth_json",
        "POST",
        "/oauth/token/",
        _json(token_base),
        headers={"content-type": "application/json"},
    )
    yield Case(
        "token repeated params",
        "oauth_json",
        "POST",
        "/oauth/token/",
        b"grant_type=a&grant_type=b&code=1&code=2",
        headers=FORM,
    )

    registration = {
        "client_name": "fuzz",
        "redirect_uris": ["http://127.0.0.1:9/cb"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    for field_name in REGISTRATION_FIELDS:
        for name, value in HOSTILE_JSON_VALUES.items():
            body = json.dumps({**registration, field_name: "__V__"}).replace('"__V__"', value).encode()
            yield Case(
                f"register {field_name} {name}",
                "oauth_json",
                "POST",
                "/oauth/register/",
                body,
                headers={"content-type": "application/json"},
            )
            if field_name == "redirect_uris":
                inner = json.dumps({**registration, field_name: ["__V__"]}).replace('"__V__"', value).encode()
                yield Case(
                    f"register redirect_uris[0] {name}",
                    "oauth_json",
                    "POST",
                    "/oauth/register/",
                    inner,
                    headers={"content-type": "application/json"},
                )
    yield Case(
        "register 1000 redirect uris",
        "oauth_json",
        "POST",
        "/oauth/register/",
        _json({**registration, "redirect_uris": [f"http://127.0.0.1:9/cb{i}" for i in range(1000)]}),
        headers={"content-type": "application/json"},
    )
    yield Case("register form body", "oauth_json", "POST", "/oauth/register/", b"client_name=x", headers=FORM)
    for name, value in HOSTILE_FORM_VALUES.items():
        if name == "huge":
            value = "x" * URL_VALUE_CHARS
        yield Case(
            f"register management id {name}",
            "oauth_json",
            "GET",
            f"/oauth/register/{value or 'x'}/",
            None,
            headers={"authorization": "Bearer x"},
        )

    authorize_base = {
        "response_type": "code",
        "client_id": "nope",
        "redirect_uri": quote("http://127.0.0.1:9/cb", safe=""),
        "scope": "mcp:read",
        "state": "s",
        "code_challenge": "c" * 43,
        "code_challenge_method": "S256",
    }
    for parameter in AUTHORIZE_PARAMETERS:
        for name, value in HOSTILE_FORM_VALUES.items():
            if name == "huge":
                value = "x" * URL_VALUE_CHARS
            query = _form({**authorize_base, parameter: value}).decode()
            yield Case(f"authorize {parameter} {name}", "authorize", "GET", f"/oauth/authorize/?{query}")


def _login_cases() -> Iterator[Case]:
    """Login form fields; the test adds the CSRF token and cookie to each body."""
    for parameter in ("username", "password", "next"):
        for name, value in HOSTILE_FORM_VALUES.items():
            fields = {"username": "alice", "password": "wrong", parameter: value}
            yield Case(
                f"login {parameter} {name}", "login", "POST", "/accounts/login/", _form(fields), headers=FORM
            )
    huge_login = _form({"username": "alice", "password": "p" * 3_000_000})
    yield Case("login oversize body", "login", "POST", "/accounts/login/", huge_login, headers=FORM)
    for name, value in HOSTILE_FORM_VALUES.items():
        if name == "huge":
            value = "x" * URL_VALUE_CHARS
        yield Case(f"login page next {name}", "login", "GET", f"/accounts/login/?next={value}")


def corpus() -> list[Case]:
    cases = [*_mcp_cases(), *_oauth_cases(), *_login_cases()]
    names = [case.name for case in cases]
    assert len(names) == len(set(names)), "case names must be unique"
    return cases


# Requests no HTTP client library will send: written to the socket byte for byte (the test adds
# ``Connection: close`` after the request line, so the answer's end is the connection's end).
HOST = b"Host: 127.0.0.1\r\n"


def _raw(request_line: bytes, *headers: bytes, body: bytes = b"") -> bytes:
    return request_line + b"\r\n" + b"".join(headers) + b"\r\n" + body


RAW_REQUESTS: dict[str, bytes] = {
    "duplicate host": _raw(
        b"POST /mcp HTTP/1.1", HOST, b"Host: evil.example\r\n", b"Content-Length: 2\r\n", body=b"{}"
    ),
    "duplicate host on login": _raw(b"GET /accounts/login/ HTTP/1.1", HOST, b"Host: evil.example\r\n"),
    "nul in header": _raw(
        b"POST /mcp HTTP/1.1", HOST, b"Mcp-Session-Id: a\x00b\r\n", b"Content-Length: 2\r\n", body=b"{}"
    ),
    "invalid utf8 in header": _raw(
        b"POST /mcp HTTP/1.1",
        HOST,
        b"Authorization: Bearer \xff\xfe\r\n",
        b"Content-Length: 2\r\n",
        body=b"{}",
    ),
    "invalid utf8 in host": _raw(b"GET /health HTTP/1.1", b"Host: \xff\xfe\r\n"),
    "nul in path": _raw(b"GET /oauth/authorize/\x00 HTTP/1.1", HOST),
    "huge header": _raw(b"GET /health HTTP/1.1", HOST, b"X-Big: " + b"a" * 200_000 + b"\r\n"),
    "huge request line": _raw(b"GET /oauth/authorize/?client_id=" + b"x" * 100_000 + b" HTTP/1.1", HOST),
    "negative content length": _raw(b"POST /oauth/token/ HTTP/1.1", HOST, b"Content-Length: -1\r\n"),
    "no host": _raw(b"GET /health HTTP/1.1"),
}
