"""The TUI's own widgets (one per file)."""
