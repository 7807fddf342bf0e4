"""Conversations (empty until the workflows toolset fills it): a toolset-level app.

May import: every app below the toolsets; never another toolset or the pages.
"""
