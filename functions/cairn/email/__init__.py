"""Inbound email: received messages become `email.received` events."""
