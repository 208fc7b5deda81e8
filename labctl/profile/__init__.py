"""The lab profile: its schema, its rules (each with reason and source), knob paths, safe YAML, loading."""
