"""The trace queries served to agents: a Model Context Protocol server (``tuidebug mcp``)."""
