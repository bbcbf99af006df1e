"""`cairn serve`: the Lambda routes on one machine. It runs DynamoDB Local
from its npm package (or uses any DynamoDB), serves the same resolver over
HTTP, and listens for SMTP in the place of SES. Lambda code never imports
this package."""
