"""Wake-ups: push an address's new events to where the agent's next run starts.

Subscriptions (`subscriptions.py`) name a target; the dispatcher
(`dispatcher.py`) learns of new events from the table's stream and has the
sender (`sender.py`) deliver them through a transport (`transports.py`,
`webhook.py`), one subscription at a time, in sequence order, with retry
state kept in the table.
"""
