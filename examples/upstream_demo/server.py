"""A small MCP server that ships with Gatehouse, so federation can be seen working right after
``make run``: ``bootstrap_demo`` registers it for the globex tenant as the stdio upstream ``demo``,
whose tools globex's people then see as ``demo_roll_dice``, ``demo_convert_units`` and
``demo_word_count`` (docs/upstreams.md).

It is an ordinary stdio server on the official SDK's ``MCPServer``, with nothing specific to
Gatehouse: ``python examples/upstream_demo/server.py`` speaks MCP on its standard input and output.
Its tools are harmless (no files, no network, no state) and return structured results (each has an
``outputSchema``), and it offers one resource and one prompt.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

server = MCPServer(
    name="gatehouse-upstream-demo",
    instructions="Dice, unit conversions and word counts: a demo upstream behind Gatehouse.",
    version="1.0.0",
    # Its standard error is the gateway's (the stdio transport passes it through): warnings only.
    log_level="WARNING",
)

# Metres per unit, and the temperature scales; one table for the tool, its schema and the resource.
LENGTHS: dict[str, float] = {
    "mm": 0.001,
    "cm": 0.01,
    "m": 1.0,
    "km": 1000.0,
    "in": 0.0254,
    "ft": 0.3048,
    "yd": 0.9144,
    "mi": 1609.344,
}
TEMPERATURES = ("C", "F", "K")
Unit = Literal["mm", "cm", "m", "km", "in", "ft", "yd", "mi", "C", "F", "K"]
MAX_TEXT = 100_000
DIFFERENT_QUANTITIES = "Cannot convert between a length and a temperature."
BELOW_ABSOLUTE_ZERO = "That temperature is below absolute zero."


class DiceRoll(BaseModel):
    rolls: list[int] = Field(description="Each die, in the order rolled.")
    total: int


class Conversion(BaseModel):
    value: float
    from_unit: str
    to_unit: str
    result: float = Field(description="The value in to_unit, rounded to 6 decimal places.")


class WordCount(BaseModel):
    words: int
    characters: int
    lines: int


@server.tool(description="Roll dice: `count` dice with `sides` sides each.")
def roll_dice(
    sides: Annotated[int, Field(ge=2, le=1000, description="Sides per die.")] = 6,
    count: Annotated[int, Field(ge=1, le=100, description="How many dice.")] = 1,
) -> DiceRoll:
    rolls = [secrets.randbelow(sides) + 1 for _ in range(count)]
    return DiceRoll(rolls=rolls, total=sum(rolls))


@server.tool(
    description="Convert a length (mm, cm, m, km, in, ft, yd, mi) or a temperature (C, F, K) to another unit."
)
def convert_units(
    value: Annotated[float, Field(ge=-1e12, le=1e12)], from_unit: Unit, to_unit: Unit
) -> Conversion:
    if from_unit in LENGTHS and to_unit in LENGTHS:
        result = value * LENGTHS[from_unit] / LENGTHS[to_unit]
    elif from_unit in TEMPERATURES and to_unit in TEMPERATURES:
        result = _from_kelvin(_to_kelvin(value, from_unit), to_unit)
    else:
        # A tool error, not a protocol error: the model reads it and can try again.
        raise ToolError(DIFFERENT_QUANTITIES)
    return Conversion(value=value, from_unit=from_unit, to_unit=to_unit, result=round(result, 6))


def _to_kelvin(value: float, unit: str) -> float:
    kelvin = {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15, "K": value}[unit]
    if kelvin < 0:
        raise ToolError(BELOW_ABSOLUTE_ZERO)
    return kelvin


def _from_kelvin(kelvin: float, unit: str) -> float:
    return {"C": kelvin - 273.15, "F": (kelvin - 273.15) * 9 / 5 + 32, "K": kelvin}[unit]


@server.tool(description="Count the words, characters and lines of a text.")
def word_count(text: Annotated[str, Field(max_length=MAX_TEXT)]) -> WordCount:
    return WordCount(
        words=len(re.findall(r"\S+", text)),
        characters=len(text),
        lines=len(text.splitlines()),
    )


@server.resource("demo://units", mime_type="application/json", description="The units convert_units knows.")
def units() -> str:
    return json.dumps({"length": list(LENGTHS), "temperature": list(TEMPERATURES)})


@server.prompt(description="Ask for a unit conversion, explained step by step.")
def explain_conversion(value: str, from_unit: str, to_unit: str) -> str:
    return (
        f"Convert {value} {from_unit} to {to_unit} with the convert_units tool, then explain the "
        "formula in one or two sentences."
    )


if __name__ == "__main__":
    server.run("stdio")
