"""Agent sessions on an address: ordered conversation items that many processes add to and pop from safely."""
