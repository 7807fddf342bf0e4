"""People and tenants: users, tenants, memberships with their roles, and the role-to-scope table,
with the services, selectors and operator commands that manage them. Imports ``core``."""
