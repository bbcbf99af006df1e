"""What the examples share: JSON on stdout."""

from __future__ import annotations

import json
from typing import Any


def show(result: Any) -> None:
    print(json.dumps(result, indent=2, ensure_ascii=False))
