#!/usr/bin/env python3
"""CDK app entry: synthesizes the Cairn stack into cdk.out.

`python3 app.py` works on its own, offline: no CDK CLI, AWS credentials,
network or Docker. The CLI normally passes cdk.json's context in; here it is
loaded as the defaults, so both ways see the same values, and context given
to the CLI (`cdk synth -c stage=preview -c ephemeral=true`) still wins.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from infra.config import StageConfig
from infra.stack import CairnStack

PROJECT_DIR = Path(__file__).resolve().parent


def cdk_json_context() -> dict[str, Any]:
    """The context defaults declared in cdk.json."""
    return json.loads((PROJECT_DIR / "cdk.json").read_text())["context"]


def main() -> None:
    """Build the app for the configured stage and write the cloud assembly."""
    # The CLI chooses the output directory through CDK_OUTDIR; alone, use cdk.out.
    outdir = os.environ.get("CDK_OUTDIR", str(PROJECT_DIR / "cdk.out"))
    app = cdk.App(context=cdk_json_context(), outdir=outdir)
    config = StageConfig.from_context(app.node)
    CairnStack(app, config.stack_name, config=config)
    app.synth()


if __name__ == "__main__":
    main()
