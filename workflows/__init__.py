"""A tenant's workflow of commands and the ``workflows`` toolset that runs them (exactly, by an
assistant or by an agent) as conversation turns. Imports the toolset apps and below."""
