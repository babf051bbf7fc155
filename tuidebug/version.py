"""tuidebug's version, at the bottom of the package (imports nothing): the trace writer, the
archive and import caches record it without importing the package face (``tuidebug/__init__``)."""

__version__ = "0.1.0"
