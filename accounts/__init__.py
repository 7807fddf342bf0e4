"""People and tenants: ``User``, ``Tenant``, ``Membership`` with its ``Role``, the role-to-scope table
(``scopes``), their services and selectors, and the operator commands that manage them
(``create_tenant``, ``add_member``).

May import: ``core`` only. Everything that uses a person or a tenant (OAuth, the MCP endpoint,
toolsets, pages) stands above it.
"""
