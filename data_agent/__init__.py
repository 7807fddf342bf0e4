"""The data agent toolset: data sources, ontologies, the SQL gate and read-only executor,
``run_query`` and the ``ask_question`` pipeline. Imports ``language_models``, ``jobs`` and below."""
