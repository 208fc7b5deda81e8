"""Results: the trial record, the SQLite store (schema, codecs, Store), JSONL/CSV interchange."""
