"""The audit trail: entries (``entry``), their writing with group commit (``trail``), the store and
its spool for when the database is away (``store``, ``spool``), refusals counted rather than
written one by one (``refusals``), retention and CSV export."""
