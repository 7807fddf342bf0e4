"""Each tenant's language models (a litellm model string and an encrypted key) and the one path
of a model call, with its metrics. Imports ``mcp_gateway`` and below."""
