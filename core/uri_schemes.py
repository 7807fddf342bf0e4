"""Private-use URI schemes (RFC 8252 §7.1): which schemes a native app may be sent back through.

A desktop app such as Cursor registers a redirect URI in a scheme of its own
(``cursor://anysphere.cursor-mcp/oauth/callback``); the browser hands the authorization response
to whichever app the operating system has registered for that scheme. RFC 8252 §7.1 says such a
scheme SHOULD be a reverse domain name (``com.example.app``), but it is not a MUST and the clients
people use do not follow it (``cursor``), so the rule here is what keeps the authorization server
from being a launcher for schemes that mean something else:

- **Syntax** (RFC 3986 §3.1): ``ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )``, ASCII only, and at
  least two characters, since ``C:/Windows/...`` would otherwise read as scheme ``c``.
- **Not a scheme with a meaning of its own**, in any letter case: what a browser runs or reads
  (``javascript``, ``data``, ``file``, ``blob``...), browsers' own pages and extensions, the
  standard network schemes (``ftp``, ``ws``, ``ssh``...), what starts a call or a message
  (``mailto``, ``tel``, ``sms``...), and operating-system handlers with a record of abuse
  (``ms-msdt``, ``search-ms`` and every ``ms-`` scheme, ``x-apple...``, ``applescript``). Nor any
  scheme beginning with ``http``, which a person would read as the web (``https-login://bank``).

The list cannot name every dangerous handler, and need not: the authorization server only ever
sends a person to a scheme after they chose Allow or Deny for a client that registered that exact
URI, and any web page can already send a browser to any scheme. What the list prevents is the
server lending its name to the schemes that matter most. The code sent there is bound to the
client's PKCE verifier, so an app that merely claims the scheme cannot redeem it.

Which schemes are allowed at all is the operator's (``OAUTH_PRIVATE_USE_SCHEMES``, read by
``core.env.env_uri_schemes``): any scheme that passes these rules (``*``), a list of them, or none.

Plain Python, no Django: ``config.settings`` checks its setting with it before any app is loaded.
"""

from __future__ import annotations

import re

ANY_SCHEME = "*"
NO_SCHEMES = "none"

# RFC 3986 §3.1, with the two-character minimum; matched against the start of a URI up to its ":".
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+")
_URI_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")

DENIED_SCHEMES = frozenset(
    {
        # Run or read by the browser itself.
        "about", "blob", "data", "file", "filesystem", "jar", "javascript", "livescript", "mhtml",
        "resource", "vbscript", "view-source", "wyciwyg", "mk", "its",
        # Browsers' own pages and extensions; Android intents and content.
        "chrome", "chrome-extension", "chrome-search", "chrome-untrusted", "devtools", "edge",
        "microsoft-edge", "brave", "opera", "vivaldi", "moz-extension", "safari-extension",
        "safari-web-extension", "isolated-app", "intent", "android-app", "content",
        # Standard network schemes (http and https have their own rules).
        "ws", "wss", "ftp", "ftps", "sftp", "ssh", "telnet", "gopher", "ldap", "ldaps", "smb", "nfs",
        "news", "nntp", "irc", "ircs", "xmpp", "sip", "sips", "rtsp", "webcal", "git",
        # What starts a call or a message.
        "mailto", "tel", "sms", "mms", "callto", "facetime", "facetime-audio", "fax",
        # Operating-system handlers with a record of abuse.
        "search", "search-ms", "shell", "applescript",
    }
)  # fmt: skip
DENIED_PREFIXES = ("http", "ms-", "x-apple")

SCHEME_SYNTAX = "is not a URI scheme (a letter, then letters, digits, '+', '-' or '.'; two at least)"
SCHEME_DENIED = "has a meaning of its own in browsers or systems, so it is not a private-use scheme"


def uri_scheme(uri: str) -> str | None:
    """The scheme of ``uri`` as written (letter case kept), or None when it has none."""
    match = _URI_SCHEME.match(uri)
    return match.group(1) if match else None


def private_use_scheme_refusal(scheme: str) -> str | None:
    """Why ``scheme`` can never be a private-use redirect scheme, or None when it can be."""
    if not _SCHEME.fullmatch(scheme):
        return SCHEME_SYNTAX
    lowered = scheme.lower()
    if lowered in DENIED_SCHEMES or lowered.startswith(DENIED_PREFIXES):
        return SCHEME_DENIED
    return None


def private_use_scheme_permitted(scheme: str, *, allowed: tuple[str, ...]) -> bool:
    """May a redirect URI use ``scheme``, given the operator's ``allowed`` (``*``, names, or empty)?"""
    if private_use_scheme_refusal(scheme) is not None:
        return False
    return ANY_SCHEME in allowed or scheme.lower() in allowed
