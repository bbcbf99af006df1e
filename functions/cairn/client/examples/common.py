"""What the examples share: JSON on stdout, and failures as the `cairn` command reports them."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from cairn.client.commands import report
from cairn.client.private import UnsafeFile
from cairn.errors import CairnError


def show(result: Any) -> None:
    print(json.dumps(result, indent=2, ensure_ascii=True))  # ASCII: prints on a terminal of any encoding


def run_example(main: Callable[[], None]) -> None:
    """Run an example: a refusal or an unreachable server ends it as `cairn` does, not with a traceback.

    `{"error": {"code", "message", …}}` on stderr and the command's exit code,
    so a reader sees what to fix (start the server, pass `--address`, …).
    """
    try:
        main()
    except (CairnError, UnsafeFile) as error:
        sys.exit(report(error))
