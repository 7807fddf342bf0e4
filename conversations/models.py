"""Conversation history and feedback arrive with the workflows toolset."""
