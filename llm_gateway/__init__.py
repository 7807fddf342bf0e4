"""The LLM gateway: one governed REST API (``/api/v1/``) and MCP tool (``llm_invoke``) for a
tenant's models, with budgets, usage records, audit and rate limits. Imports ``language_models`` and below."""
