"""Each tenant's language models (a litellm model string and an encrypted key) and ``llm_complete``,
the one place Gatehouse calls a model, with its metrics.

May import: ``core``, ``accounts``, ``oauth`` and ``mcp_gateway``. Toolsets that use a model
(``data_agent``) import it.
"""
