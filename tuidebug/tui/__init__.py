"""The terminal UI (Textual): ``tuidebug open TRACE``. Reads traces; never imports torch."""
