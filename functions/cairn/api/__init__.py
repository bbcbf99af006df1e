"""HTTP edge: one Powertools resolver (`app.create_app`) serves Lambda and
`cairn serve` alike. It holds the routes, one module per resource
(`routes`), the mapping of every failure to a JSON error, the wire schemas
and OpenAPI, and the Lambda entry points (buffered and streamed); it calls
the use cases, which know nothing of HTTP."""
