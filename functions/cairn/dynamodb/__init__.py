"""DynamoDB adapter: the only code that knows table keys and item shapes."""
