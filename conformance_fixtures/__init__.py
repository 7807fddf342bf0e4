"""The fixture tools, resources and prompts the official MCP conformance suites call: a test
fixture shipped as a toolset (``conformance``), enabled per tenant. Imports ``mcp_gateway`` and below."""
