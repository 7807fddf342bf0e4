"""The data agent toolset: a tenant's data sources and ontologies, catalogue resources, the SQL gate
and read-only executor, ``run_query``, the ``ask_question`` pipeline and per-person preferences.

May import: every app below the toolsets (``core``, ``accounts``, ``oauth``, ``mcp_gateway``,
``language_models``); never another toolset or the pages. It reaches the endpoint only through the
registry (``toolset.py``), listed in ``GATEHOUSE_TOOLSETS``.
"""
