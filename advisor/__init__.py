"""advisor: recommendations from measured labctl trials."""
