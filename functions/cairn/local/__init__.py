"""`cairn serve`: the Lambda routes on one machine, on DynamoDB Local."""
