"""A tenant's workflow: contexts of commands a client can discover and run.

It sits above ``data_agent`` in the layers because a command may run a parameterised query through
data_agent's SQL gate and executor; the MCP tools that run commands arrive as the ``workflows``
toolset in a later increment.
"""
