"""Benchmarks of Cairn on DynamoDB Local that print figures and never fail on time.

Run `python -m bench` from the project root (or `make bench`).
"""
