"""The documents a newcomer reads stay usable: a short README, links that land, and no block nobody runs.

The site's own links are checked by `mkdocs build --strict` (`make docs`, run
by `make test`); this covers the Markdown files at the repository's root,
which the site does not build, and the inventory of code blocks that
`tests/e2e/test_readme.py` runs.
"""

from __future__ import annotations

import re

from tests.support.docs import NOT_IN_TOUR, ROOT, TOUR_PAGES, blocks, not_in_tour, pages, readme_tour, runnable
from tests.support.docs import tour_blocks as site_tour

ROOT_DOCUMENTS = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "SECURITY.md")
FIRST_SCREEN = 25  # lines


def test_every_runnable_block_is_run_by_a_tour_or_accounted_for() -> None:
    toured = {(block.page, block.line) for block in [*site_tour(), readme_tour()]}
    loose = [
        str(block)
        for page in pages()
        for block in runnable(page)
        if (block.page, block.line) not in toured and not not_in_tour(block)
    ]
    assert loose == [], (
        "run these in a tour page, or list them in NOT_IN_TOUR (tests/support/docs.py) with who runs them"
    )


def test_every_block_listed_as_not_toured_still_exists() -> None:
    listed = {
        (block.page, start)
        for page in pages()
        for block in runnable(page)
        for (p, start) in NOT_IN_TOUR
        if p == block.page and block.first_line.startswith(start)
    }
    assert set(NOT_IN_TOUR) - listed == set()


def test_the_tour_pages_are_pages_of_the_site() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    assert all(f" {page.removeprefix('docs/')}\n" in nav for page in TOUR_PAGES)


def test_the_readme_is_short_and_shows_the_way_on_its_first_screen() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    first_screen = "\n".join(readme.splitlines()[:FIRST_SCREEN])
    assert "](docs/ARCHITECTURE.md)" in first_screen, "the code map is linked on the first screen"
    assert "](docs/index.md)" in first_screen, "so is the documentation"
    for command in ("make serve", "make test", "make check", "make unit"):
        assert command in readme, command


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub and the site make it for plain headings."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: str) -> set[str]:
    text = (ROOT / path).read_text()
    fenced = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return {slug(heading) for heading in re.findall(r"^#+ (.+)$", fenced, flags=re.M)}


def test_links_in_the_root_documents_land() -> None:
    broken = []
    for document in ROOT_DOCUMENTS:
        text = re.sub(r"^```.*?^```", "", (ROOT / document).read_text(), flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # another site
            path, _, anchor = target.partition("#")
            path = path or document
            if not (ROOT / path).exists():
                broken.append(f"{document}: {target}")
            elif anchor and path.endswith(".md") and anchor not in anchors(path):
                broken.append(f"{document}: {target} (no such heading)")
    assert broken == []


def test_the_readme_holds_the_set_up_commands_and_its_tour() -> None:
    readme_blocks = blocks("README.md")
    assert [block.language for block in readme_blocks] == ["sh", "sh"], "the set-up commands and the tour"
    assert not_in_tour(readme_blocks[0]) and not not_in_tour(readme_blocks[1])


def test_lists_in_the_site_nest_by_four_spaces() -> None:
    # The site's Markdown reads a list indented by fewer than four spaces as part of its parent list.
    shallow = [
        f"{page}: {line}"
        for page in pages()
        if page.startswith("docs/")
        for line in re.sub(r"^```.*?^```", "", (ROOT / page).read_text(), flags=re.S | re.M).splitlines()
        if re.match(r" {1,3}([-*+]|\d+\.) ", line)
    ]
    assert shallow == []
