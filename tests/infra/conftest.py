"""Synthesized templates shared by every infra test.

Synthesis costs seconds, so each deployment shape is synthesized once per
session and every test reads the result.
"""

from __future__ import annotations

import pytest

from tests.infra.synthesis import FULL_CONTEXT, Synthesis, synthesize


@pytest.fixture(scope="session")
def default(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    """cdk.json's defaults for a stage: no email, no custom domain, no alarm topic."""
    return synthesize({"stage": "test"}, tmp_path_factory.mktemp("default"))


@pytest.fixture(scope="session")
def full(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    return synthesize(FULL_CONTEXT, tmp_path_factory.mktemp("full"))


@pytest.fixture(scope="session")
def ephemeral(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    # A string, as `cdk synth -c ephemeral=true` passes it.
    return synthesize(
        {"stage": "preview", "ephemeral": "true", "email_domain": "preview.example.com"},
        tmp_path_factory.mktemp("ephemeral"),
    )


@pytest.fixture(params=["default", "full", "ephemeral"])
def every_shape(request: pytest.FixtureRequest) -> Synthesis:
    """Each deployment shape in turn, for checks that must hold for all of them."""
    return request.getfixturevalue(request.param)
