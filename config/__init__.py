"""The project itself, on top of every app: settings (read from the environment through
``core.env``), URLs, the ASGI application, logging format, start-up security checks and ``/health``.

May import: any app. Nothing imports it but Django (``DJANGO_SETTINGS_MODULE``) and Daphne.
"""
