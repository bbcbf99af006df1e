"""Transcripts and product memory: goa-ai's `model.Message` with exact JSON,
replay from the run log, validators, history policies, and the product's own
memory store (kept apart from the runtime store)."""
