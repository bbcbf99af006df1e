"""examples/openai-agents-session and examples/strands-session, each run as a user would: separate processes
against `cairn serve`, asserting what the user sees on the terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.serve import ServeProcess

# Each test works on addresses of its own, so they share one server.
pytestmark = pytest.mark.one_server

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OPENAI_CHAT = EXAMPLES / "openai-agents-session" / "openai_chat.py"
STRANDS_CHAT = EXAMPLES / "strands-session" / "strands_chat.py"
REFUSED = (
    "Refused: another run of session 'conversation-1' is in progress, holding it until",
    "at most. Nothing of this run was stored; run this again when it has finished.",
)


def environment(url: str | None = None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in ("CAIRN_URL", "OPENAI_API_KEY")}
    # A key would have the OpenAI example send traces to OpenAI: the examples must run with no network and no key.
    return {**env, "CAIRN_URL": url} if url else env


def chat(program: Path, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(program), *args]
    return subprocess.run(command, env=environment(url), capture_output=True, text=True, timeout=120, check=False)


def said(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The conversation a run printed, one line a turn, after a run that succeeded and complained of nothing."""
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.splitlines()


def test_an_openai_agents_conversation_goes_on_in_a_second_process(served: ServeProcess, tmp_path: Path):
    saved = str(tmp_path / "chat.json")
    # The first run is told the server by argument; the second finds everything in the address file.
    first = chat(OPENAI_CHAT, "--url", served.base_url, "--address", saved, "My name is Ada.")
    second = chat(OPENAI_CHAT, "--address", saved, "What is my name?")

    assert said(first) == [
        "session 'conversation-1', 2 items:",
        "  user: My name is Ada.",
        "  assistant: (scripted) So far you said: My name is Ada.",
    ]
    # The model of the second run was handed the first run's turn, which the session still holds.
    assert said(second) == [
        "session 'conversation-1', 4 items:",
        "  user: My name is Ada.",
        "  assistant: (scripted) So far you said: My name is Ada.",
        "  user: What is my name?",
        "  assistant: (scripted) So far you said: My name is Ada. / What is my name?",
    ]
    other = chat(OPENAI_CHAT, "--address", saved, "--session", "conversation-2", "Hello.")
    assert said(other)[0] == "session 'conversation-2', 2 items:"  # another session starts empty


def test_a_strands_conversation_goes_on_in_a_second_process(served: ServeProcess, tmp_path: Path):
    saved = str(tmp_path / "chat.json")
    # The first run finds the server in CAIRN_URL; the second, in the address file.
    first = chat(STRANDS_CHAT, "--address", saved, "My name is Ada.", url=served.base_url)
    second = chat(STRANDS_CHAT, "--address", saved, "What is my name?")

    assert said(first) == [
        "session 'conversation-1', 2 messages:",
        "  user: My name is Ada.",
        "  assistant: (scripted) So far you said: My name is Ada.",
    ]
    assert said(second) == [
        "session 'conversation-1', 4 messages:",
        "  user: My name is Ada.",
        "  assistant: (scripted) So far you said: My name is Ada.",
        "  user: What is my name?",
        "  assistant: (scripted) So far you said: My name is Ada. / What is my name?",
    ]


def test_a_strands_run_that_overlaps_another_is_refused_with_a_message_and_stores_nothing(
    served: ServeProcess, tmp_path: Path
):
    saved = str(tmp_path / "chat.json")
    said(chat(STRANDS_CHAT, "--address", saved, "My name is Ada.", url=served.base_url))
    slow = subprocess.Popen(
        [sys.executable, str(STRANDS_CHAT), "--address", saved, "--pause", "Slowly, please."],
        env=environment(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert slow.stdout is not None
        # Printed once the run stored its prompt and called the model: it holds the session from here on.
        waiting = slow.stdout.readline()
        assert waiting.startswith("The model is thinking: press Enter"), slow.stderr.read() if slow.stderr else ""

        overlapping = chat(STRANDS_CHAT, "--address", saved, "Me too!")
        assert overlapping.returncode == 3  # as `cairn` exits when a compare-and-set lost
        assert overlapping.stdout == ""
        [message] = overlapping.stderr.splitlines()  # one sentence, no traceback
        assert message.startswith(REFUSED[0]) and message.endswith(REFUSED[1]), message

        rest, errors = slow.communicate(input="\n", timeout=120)
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait(timeout=30)
    assert slow.returncode == 0, errors
    assert rest.splitlines()[-2:] == [
        "  user: Slowly, please.",
        "  assistant: (scripted) So far you said: My name is Ada. / Slowly, please.",
    ]
    # The next run sees both finished turns, one after the other, and nothing of the refused one.
    assert said(chat(STRANDS_CHAT, "--address", saved, "Who spoke?")) == [
        "session 'conversation-1', 6 messages:",
        "  user: My name is Ada.",
        "  assistant: (scripted) So far you said: My name is Ada.",
        "  user: Slowly, please.",
        "  assistant: (scripted) So far you said: My name is Ada. / Slowly, please.",
        "  user: Who spoke?",
        "  assistant: (scripted) So far you said: My name is Ada. / Slowly, please. / Who spoke?",
    ]
