"""A tenant's people, managed by its admins: invitations by email (``services``), the email with
the link (``emails``), changing a member's role or removing them (``members``), and what the
members page and the invitation page read (``selectors``).

An invitation's link works once and for ``INVITATION_VALID_DAYS``; only its token's SHA-256 is
stored. Accepting never changes a membership that already exists: in a tenant that requires its
identity provider, the person signs in through it first, which makes them a member with the role
the provider maps, and that role stands (each later sign-in maps it anew); otherwise the person
joins with the invited role. A tenant always keeps an admin who can sign in.
"""
