"""Where papers come from: every source behind one interface (``base.Source``)."""
