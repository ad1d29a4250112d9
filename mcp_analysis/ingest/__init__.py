"""Files -> document items -> chunks -> embeddings -> store."""
