"""Files -> DoclingDocument -> items -> chunks -> embeddings -> store.

Contract: `pipeline.Ingestor` is the one way documents enter a knowledge base (`add`, the
sample build and the Python API all go through it). Re-adding an unchanged file (same
sha256) is a no-op; changed bytes replace its document under a new id. Each batch becomes
visible in one commit (its `document_meta` rows, written last), so a killed ingest leaves
nothing half-written. Every format ends as a DoclingDocument, so items carry docling
``self_ref`` values and labels whatever the source. Writes go through a KnowledgeBase's
store and embedder; nothing here knows sessions or front doors.
"""
