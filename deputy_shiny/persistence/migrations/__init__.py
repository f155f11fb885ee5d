"""The Alembic migrations of :class:`~deputy_shiny.persistence.sql_store.SqlStore`'s schema.

``versions/`` holds one module per revision (``revision``, ``down_revision``,
``upgrade()``); :mod:`deputy_shiny.persistence.sql_migrate` runs them. A new schema
change is a new module there, never an edit of an old one.

Examples:
    >>> from deputy_shiny.persistence.migrations import SCRIPT_LOCATION
    >>> SCRIPT_LOCATION.name
    'migrations'
"""

from pathlib import Path

SCRIPT_LOCATION = Path(__file__).resolve().parent
"""The folder Alembic reads (its ``script_location``)."""
