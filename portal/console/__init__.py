"""The tenant console, ``/console/<tenant>/``: a tenant's people run their tenant in the browser.

Admins change things; viewers and contributors see the same pages without forms, told why. One
tenant at a time, with a switcher for people in several; another tenant's console, or a tenant the
person is not in, is a 404 (``access``). Each page is a module of its own; every change it makes is
the same service call the admin and the management commands make, audited with who and what.
"""
