"""app.py, the entry point `make synth` and the CDK CLI run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from infra.config import PROJECT_DIR


def test_app_synthesizes_offline_with_cdk_json_defaults(tmp_path: Path) -> None:
    # No AWS credentials or region, and context the way the CLI passes it
    # (CDK_CONTEXT_JSON): bundling skipped, as `cdk destroy` would, so no PyPI.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env |= {
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "CDK_OUTDIR": str(tmp_path),
        "CDK_CONTEXT_JSON": json.dumps(
            # A feed this small keeps a smaller reserve for its owner: the reserve must leave outsiders a slot.
            {"aws:cdk:bundling-stacks": [], "max_events": "7", "owner_reserved_events": "2"}
        ),
    }

    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "cairn-dev.template.json").read_text())
    functions = [r for r in written["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    # cdk.json gives the stage, the CLI's context wins over the defaults.
    assert functions[0]["Properties"]["Environment"]["Variables"]["CAIRN_MAX_EVENTS"] == "7"
