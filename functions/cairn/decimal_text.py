"""Whole numbers written in text from outside (cursors, revisions, record and event ids)."""


def is_decimal(text: str) -> bool:
    """True when `text` is one or more of the ASCII digits 0-9.

    `str.isdigit` alone also accepts characters such as "²", which `int`
    refuses (a 500 where a 400 belongs), and "٣", which `int` reads as 3 (a
    second spelling of the same id).
    """
    return text.isascii() and text.isdigit()
