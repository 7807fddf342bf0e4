"""The model-call tests' members (``tests.support.members``), and the admin's *Test the model*
action under the test client."""

import pytest

from tests.support import members

contributor = members.contributor


@pytest.fixture
def admin_model_test(settings):
    """The test client runs the admin's action on an event loop of its own, which the audit
    trail's group commit (a pool bound to the server's loop under Daphne) must not outlive: its
    ``model.called`` rows are left to the end-to-end tests. Transactional: the governed path's
    records are written on threads of their own, which see only committed rows."""
    settings.GATEHOUSE = {**settings.GATEHOUSE, "GATEHOUSE_AUDIT": False}
