"""Whole numbers written in text from outside (cursors, revisions, record and event ids)."""


def is_decimal(text: str) -> bool:
    """True when `text` is one or more of the ASCII digits 0-9.

    `str.isdigit` alone also accepts characters such as "²", which `int`
    refuses (a 500 where a 400 belongs), and "٣", which `int` reads as 3 (a
    second spelling of the same id).
    """
    return text.isascii() and text.isdigit()


# Ids, cursors and positions fit 64 bits: 19 digits. Python's `int` refuses text of over 4,300
# digits (a ValueError, so a 500 where a 400 belongs) and would read shorter giants slowly.
MAX_DIGITS = 19


def parse_decimal(text: str) -> int | None:
    """`text` as a whole number when it is one of at most `MAX_DIGITS` ASCII digits, else None."""
    return int(text) if len(text) <= MAX_DIGITS and is_decimal(text) else None
