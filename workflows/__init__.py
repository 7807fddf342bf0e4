"""A tenant's workflow: contexts of commands a client can discover and run, and the ``workflows``
toolset that runs them (exactly, through an assistant, or through an agent) as turns of each
person's conversation.

It sits above ``data_agent`` and ``conversations`` in the layers: a command may run a
parameterised query through data_agent's SQL gate and executor, and each turn is kept in
``conversations``.
"""
