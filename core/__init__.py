"""The floor every app stands on: the error hierarchy and its two translations, the audit trail,
rate limits, metrics, request context, database access and typed settings. Imports no other app."""
