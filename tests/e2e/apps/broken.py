"""An app that fails at import: the harness must report its traceback."""

raise RuntimeError("broken on purpose: the e2e harness shows this message")
