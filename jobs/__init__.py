"""Human-in-the-loop jobs on the task queue (django-tasks): rows, steps, decisions, workers and
recovery, and the runner of MCP tool tasks. Imports ``mcp_gateway`` and below."""
