"""The people-facing pages: sign-in, a person's connected applications, sessions and
conversations, and the commands ``make run`` calls. Imports every app below ``config``."""
