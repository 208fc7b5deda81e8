"""The TUI's screens (one per file): host, labs, sweep, results, advice, and two dialogs."""
