"""Every runtime store implementation runs the same contract suite."""

from __future__ import annotations

import pytest

from cairn.runtime.memory import MemoryRuntimeStore


@pytest.fixture(params=["memory"])
def store(request):
    if request.param == "memory":
        return MemoryRuntimeStore()
    raise AssertionError(request.param)
