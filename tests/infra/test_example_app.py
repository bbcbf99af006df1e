"""examples/cdk-app, the team's own app that `make synth` also synthesizes: it works offline and passes cdk-nag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from infra.config import PROJECT_DIR


def test_the_example_app_synthesizes_cdk_nag_clean(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env |= {
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "CDK_OUTDIR": str(tmp_path),
        "CDK_CONTEXT_JSON": json.dumps({"aws:cdk:bundling-stacks": []}),
        "PYTHONPATH": f"{PROJECT_DIR / 'functions'}{os.pathsep}{PROJECT_DIR}",
    }

    result = subprocess.run(
        [sys.executable, "examples/cdk-app/team_app.py"],
        cwd=PROJECT_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )

    assert result.returncode == 0, result.stderr[-3000:]
    resources = json.loads((tmp_path / "agents-example.template.json").read_text())["Resources"]
    (flow,) = [logical_id for logical_id, r in resources.items() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    assert [r["Type"] for r in resources.values()].count("Custom::CairnAddress") == 1
    # The state machine is on the service's wake-up allow-list, by its name.
    (api,) = [
        r
        for r in resources.values()
        if r["Properties"].get("Handler") == "cairn.entrypoints.api_handler.lambda_handler"
    ]
    name = resources[flow]["Properties"]["StateMachineName"]
    assert (
        f"arn:aws:states:*:*:stateMachine:{name}"
        in api["Properties"]["Environment"]["Variables"]["CAIRN_WAKE_TARGET_ARNS"]
    )
    # Its execution waits on the address's callback: a task that hands its token to a subscription.
    definition = json.dumps(resources[flow]["Properties"]["DefinitionString"])
    assert ":states:::lambda:invoke.waitForTaskToken" in definition
    assert "$$.Task.Token" in definition
