"""People's conversations with a tenant's workflow, their turns, and where each session or client
stands; the workflows toolset writes through it. Imports ``language_models``, ``jobs`` and below."""
