"""Address use cases: provisioning, inbox delivery, the event feed."""
