"""Gemini CLI: everything about that CLI, in one folder (adapter, stream reader, policy rendering, config and store readers)."""
