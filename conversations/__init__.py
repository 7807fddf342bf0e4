"""Conversations: a person's conversations with a tenant's workflow, their turns, and where each
MCP session (or, on 2026-07-28, each client) stands: a toolset-level app the workflows toolset
writes through.

Kept apart from ``workflows`` because they are the person's, not the tenant's: what a workflow
can do changes when an operator imports a new one; what someone asked it stays theirs.
``services`` writes (binding, rotation, turns, feedback, the cross-worker turn lock),
``selectors`` reads, ``admin`` shows them read-only to operators.

May import: every app below the toolsets; never another toolset or the pages.
"""
