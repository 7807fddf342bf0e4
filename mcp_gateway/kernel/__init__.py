"""What the endpoint and every toolset share: the tool registry, the caller's identity, tool
results, toolset access per tenant, scopes, tasks as data, sessions and the change log as rows,
and the one module that touches the SDK's private names (``sdk``). Imports nothing else of
``mcp_gateway``."""
