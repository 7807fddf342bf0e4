"""The literature search: a job kind, its sources, the library, exports and the ``research``
toolset with its MCP tasks. Imports ``language_models``, ``jobs`` and below."""
