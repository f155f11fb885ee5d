"""UI and server pieces of the reference app (app.py)."""
