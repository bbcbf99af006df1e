"""The documentation's code blocks: which ones the tour runs, in what order, and who runs the rest.

The README's short tour and the site's tour are scripts that work: their
shell (and Python) blocks run as written against `cairn serve`
(`tests/e2e/test_readme.py`). Every other block that looks runnable is
listed in `NOT_IN_TOUR` with the test that runs it or the reason nothing can,
and `tests/unit/test_docs.py` fails on a block in neither place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = ("sh", "bash", "shell", "console", "python")
# The site's tour: its first page, then the pages it continues on, in the order one shell runs them.
TOUR_PAGES = (
    "docs/tour.md",
    "docs/addresses.md",
    "docs/email.md",
    "docs/wakeups.md",
    "docs/runtime.md",
    "docs/agent-tools.md",
)
# Runnable-looking blocks no tour runs, by page and the start of their first line: who runs them, or why nothing can.
NOT_IN_TOUR = {
    ("README.md", "make serve"): "the set-up commands themselves",
    ("docs/index.md", "make serve"): "the set-up commands themselves",
    ("CONTRIBUTING.md", "make serve"): "the set-up commands themselves",
    ("CONTRIBUTING.md", "make docs"): "the documentation's own build (`make test` runs it)",
    ("docs/runtime.md", "from cairn.transcript.replay import"): (
        "a sketch over a store and a model of the reader's; tests/unit/test_transcript_replay.py, "
        "test_transcript_validation.py and test_history_policy.py run each function"
    ),
    ("docs/agent-tools.md", "python -m cairn.client.examples."): "tests/e2e/test_examples.py runs each example",
    ("docs/wakeups.md", "from aws_durable_execution_sdk_python"): (
        "a durable function, which runs only in Lambda; tests/e2e/test_durable_callbacks.py subscribes a callback "
        "id the same way on cairn serve and sees the first reply complete it"
    ),
    ("docs/langgraph.md", "pip install"): "installs from a package index; `make test` installs the extra with `dev`",
    ("docs/langgraph.md", "from langgraph.types import Command"): (
        "a sketch over a graph of the reader's; tests/e2e/test_langgraph.py runs such a graph in two processes"
    ),
    ("docs/langgraph.md", "python examples/langgraph-wakeup/"): (
        "tests/e2e/test_examples.py runs the example's steps, the callback posted to the inbox URL"
    ),
    ("docs/langgraph.md", "from cairn.client import Address"): (
        "tests/e2e/test_langgraph_store.py runs it on an address of its own"
    ),
    ("docs/openai-agents.md", "pip install"): (
        "installs from a package index; `make test` installs the extra with `dev`"
    ),
    ("docs/openai-agents.md", "from agents import Agent, Runner"): (
        "a sketch over a model of the reader's; tests/e2e/test_openai_agents.py runs such an agent in two processes"
    ),
    ("docs/openai-agents.md", "from agents.memory import OpenAIResponsesCompactionSession"): (
        "needs OpenAI's compaction endpoint; tests/e2e/test_openai_agents.py wraps a CairnSession so, with that "
        "endpoint answered in the test's process"
    ),
    ("docs/strands.md", "pip install"): (
        "installs from a package index; `make test` installs strands-agents with `dev` (see the Makefile)"
    ),
    ("docs/strands.md", "from strands import Agent"): (
        "a sketch over a model of the reader's; tests/e2e/test_strands.py runs such an agent in several processes"
    ),
    ("docs/cdk.md", "from aws_cdk import"): "tests/infra/test_service.py synthesizes it",
    ("docs/deploy.md", "make synth"): "deploys to an AWS account (tests/infra synthesizes the stack)",
    ("docs/deploy.md", "npx aws-cdk destroy"): "tears down a deployment in an AWS account",
}


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository's root
    line: int  # of its opening fence
    language: str
    text: str

    @property
    def first_line(self) -> str:
        return self.text.split("\n", 1)[0]

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.language}) {self.first_line[:60]}"


def pages() -> list[str]:
    """Every document a reader meets: the root's Markdown files and the site's pages."""
    found = sorted(path.name for path in ROOT.glob("*.md"))
    return found + sorted(f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md"))


def blocks(page: str) -> list[Block]:
    """The fenced code blocks of a page, in order."""
    text = (ROOT / page).read_text()
    found = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```$", text, flags=re.S | re.M):
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(page, line, match.group(1), match.group(2)))
    return found


def not_in_tour(block: Block) -> str | None:
    """Why `block` is not part of a tour, if it is listed."""
    return next(
        (
            why
            for (page, start), why in NOT_IN_TOUR.items()
            if block.page == page and block.first_line.startswith(start)
        ),
        None,
    )


def runnable(page: str) -> list[Block]:
    return [block for block in blocks(page) if block.language in RUNNABLE]


def tour_blocks() -> list[Block]:
    """The site's tour: every runnable block of its pages, in order, but those listed."""
    return [block for page in TOUR_PAGES for block in runnable(page) if not not_in_tour(block)]


def readme_tour() -> Block:
    """The README's short tour: its one runnable block that is not the set-up commands."""
    [tour] = [block for block in runnable("README.md") if not not_in_tour(block)]
    return tour
