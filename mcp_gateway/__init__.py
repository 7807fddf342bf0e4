"""The MCP endpoint: the SDK's server behind Gatehouse's transport, every request through one
pipeline, over the kernel toolsets share. Imports ``core``, ``accounts``, ``oauth``; never a toolset."""
