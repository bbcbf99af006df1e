"""CDK definition of Cairn: the stage configuration, the constructs and the stack.

Nothing here imports the `cairn` package: Lambda handlers are named by string,
so synthesizing never needs the application's dependencies.
"""
