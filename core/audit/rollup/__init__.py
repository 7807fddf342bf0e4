"""The daily rollup of tool calls, so that the console's overview does not aggregate a tenant's
million audit rows on every request.

What: per tenant, finished UTC day and tool, the calls and errors (``ToolCallDay``); per tenant and
day, the calls, errors and p50/p95 duration (``ToolCallDayTotal``: percentiles cannot be added up
across tools); the same two over every tenant at once (``AllTenantsToolCallDay``,
``AllTenantsToolCallDayTotal``), for the operators' dashboard: percentiles over every tenant
cannot be made of each tenant's, and it counts the calls of no tenant too, those of a tenant
deleted since included, which lose their tenant's rows with it; and which days are rolled up,
with how many ``tool.called`` rows each read (``RolledUpDay``, one row per day for every tenant at
once). A day's rows are all written in the same pass, in one transaction.

When: ``tool_call_days_roll_up`` (``services``) rolls up each of the last ``ROLLUP_DAYS`` days once
it has been over for ``ROLLUP_SETTLE``. Every ``manage.py jobs_worker`` runs it at start and then
every ``ROLLUP_INTERVAL_SECONDS``, beside the recovery of job steps, so it needs no scheduler of
its own; ``manage.py audit_rollup`` runs it on demand (``--days`` for further back). Runs are one at
a time on PostgreSQL (an advisory lock: a second run waits, then finds the days done), and every
write is an upsert, so a run is safe at any time and twice.

Late rows: the audit spool (``core.audit.spool``) can store rows, with the ``created`` of their
call, after their day was rolled up (the database was away; an operator replays a dead host's
spool days later). Each run therefore counts every day's ``tool.called`` rows first (one
``GROUP BY`` on the ``(action, created)`` index) and rolls up again any day that now has more rows
than it read, whatever their lateness within ``ROLLUP_DAYS``. Until that run, within
``ROLLUP_INTERVAL_SECONDS``, the overview shows the day without them.

Readers (``selectors``, for one tenant or every tenant: ``portal.console.overview_selectors`` and
``portal.operator.selectors`` use them) take a day from the rollup when it has a ``RolledUpDay``
and aggregate the audit rows live otherwise (today, a day not rolled up yet), which gives the same
figures as aggregating every day live.

Retention: ``core.audit.retention`` purges old audit rows, never the rollup, so a rolled-up day
keeps its figures after its rows are gone (by design: the rollup is small). A day with fewer rows
than it read is not rolled up again for that reason, and readers prefer the rollup for it.
"""
