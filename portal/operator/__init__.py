"""The operators' dashboard at the top of the admin's index: every tenant's traffic and the health
of the processes behind it (``selectors``, ``health``), as figures and tables in the page and as
``/admin/dashboard.json`` for the charts its script draws."""
