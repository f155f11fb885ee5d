"""Small leaves the rest of the package shares; each imports only ``errors``.

``atomic`` (atomic file writes), ``callables`` (async-callable checks), ``chain`` (one
exception-chain walk), ``config`` (the frozen configuration base), ``json`` (JSON value
checks), ``redact`` (the one credential scrubber), ``text`` (text helpers), ``yaml``
(strict YAML for untrusted files), ``sync`` (sync wrappers), ``timeouts`` (timers that
do not keep a session alive), ``metadata`` (run_context validation), ``interrupt``
(interrupting a parked await), ``safe_fs`` (opening what was checked: beneath a root
descriptor, no symlink followed), ``log_context`` (a run's ids on log records),
``shell_lex`` (the small shell lexer behind the dangerous-bash check).
Nothing is re-exported here: import the module.
"""
