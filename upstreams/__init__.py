"""A tenant's other MCP servers, federated into its lists and called through a bounded pool with
Gatehouse's own credentials (the ``upstreams`` toolset). Imports ``language_models``, ``jobs`` and below."""
