"""Synthesized templates shared by every infra test.

Synthesis costs seconds, so each deployment shape is synthesized once per
session and every test reads the result.
"""

from __future__ import annotations

import pytest

from tests.infra.synthesis import FULL_CONTEXT, Synthesis, once_per_run, synthesize


@pytest.fixture(scope="session")
def default(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    """cdk.json's defaults for a stage: no email, no custom domain, no alarm topic."""
    return once_per_run(tmp_path_factory, "default", lambda outdir: synthesize({"stage": "test"}, outdir))


@pytest.fixture(scope="session")
def full(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    return once_per_run(tmp_path_factory, "full", lambda outdir: synthesize(FULL_CONTEXT, outdir))


@pytest.fixture(scope="session")
def ephemeral(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    # A string, as `cdk synth -c ephemeral=true` passes it.
    context = {"stage": "preview", "ephemeral": "true", "email_domain": "preview.example.com"}
    return once_per_run(tmp_path_factory, "ephemeral", lambda outdir: synthesize(context, outdir))


@pytest.fixture(params=["default", "full", "ephemeral"])
def every_shape(request: pytest.FixtureRequest) -> Synthesis:
    """Each deployment shape in turn, for checks that must hold for all of them."""
    return request.getfixturevalue(request.param)
