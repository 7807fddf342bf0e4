"""Tool argument types the data agent's tools share, so each is written, and published in their
input schemas, exactly one way."""

from __future__ import annotations

from typing import Annotated, TypeAlias

from pydantic import Field, StringConstraints

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

OntologyId: TypeAlias = Annotated[
    str,
    StringConstraints(pattern=UUID_PATTERN),
    Field(description="The ontology's id, from the gatehouse://ontologies resource."),
]
