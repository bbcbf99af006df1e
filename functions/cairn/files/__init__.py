"""Files of an address: bytes under a key, for frameworks that keep blobs (Strands' `Storage`)."""
