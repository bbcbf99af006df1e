"""Inbound email: a received message (from SES in AWS, from the SMTP
listener of `cairn serve` locally) becomes one `email.received` event per
address it names. MIME parsing shows headers, bodies and attachments as
Cairn presents them; attachments are read from the stored message when
asked for, never copied at ingest."""
