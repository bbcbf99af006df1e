#!/usr/bin/env python3
"""CDK app entry: synthesizes the Cairn stack into cdk.out.

`python3 app.py` works on its own: no CDK CLI, AWS credentials or Docker
(bundling the Lambda dependencies needs PyPI). The CLI normally passes
cdk.json's context in; here it is loaded as the defaults, so both ways see the
same values, and context given to the CLI (`cdk synth -c stage=preview -c
ephemeral=true`) still wins.
"""

from __future__ import annotations

import os

import aws_cdk as cdk

from infra.config import PROJECT_DIR, cdk_json_context
from infra.stack import build


def main() -> None:
    """Build the app for the configured stage and write the cloud assembly."""
    # The CLI chooses the output directory through CDK_OUTDIR; alone, use cdk.out.
    outdir = os.environ.get("CDK_OUTDIR", str(PROJECT_DIR / "cdk.out"))
    app = cdk.App(context=cdk_json_context(), outdir=outdir)
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
