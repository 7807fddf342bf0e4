"""OpenAPI upstreams: a REST API described by an OpenAPI 3.0 or 3.1 document, whose operations
Gatehouse serves as tools behind the same sign-in, scopes, limits, audit and egress rules as an
upstream MCP server's.

The document is loaded and validated once, when the upstream is saved (``document``, ``fetch``);
each selected operation becomes a tool whose description of the call (method, path, where each
argument goes) is stored with it (``tools``), so neither the catalog nor a call parses the document
again (``calls``). Nothing is re-exported here: ``upstreams.config`` imports ``security`` alone, and
a package that imported its own modules would import ``upstreams.config`` back.
"""
