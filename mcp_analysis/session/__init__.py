"""Per-client analysis state and interpreter handles: keyed, expiring, hibernated."""
