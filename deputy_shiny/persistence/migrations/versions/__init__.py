"""One module per schema revision, in order of ``down_revision``."""
