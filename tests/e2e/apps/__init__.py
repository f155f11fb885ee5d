"""Scenario apps for the browser tests; each is started with ``shiny run <file>``."""
