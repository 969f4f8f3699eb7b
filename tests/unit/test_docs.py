"""The docs site: the reference covers every setting, route, key and command; the README keeps its rules.

The reference is generated from the code by ``docs/reference.py`` (run by ``docs/hooks.py`` when
mkdocs builds): these tests check that what the code has is there, that a missing description
stops it, that ``settings.example.env`` is the generated one, and that ``mkdocs build --strict``
passes (a broken link, anchor or page fails it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS))

import ref_cli  # noqa: E402  (docs/ is on the path now)
import ref_config  # noqa: E402
import ref_http  # noqa: E402
import ref_settings  # noqa: E402
import reference  # noqa: E402

from notifier import config as config_module  # noqa: E402
from notifier.config import NOT_YET, Config  # noqa: E402
from notifier.http.app import create_app  # noqa: E402
from notifier.settings import Settings, load_settings  # noqa: E402

QUICK_START = "```sh\npip install . && notifier serve\n```\n"
TEST_COMMAND = "```sh\ntests/run\n```\n"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("NOTIFIER_"):
            monkeypatch.delenv(name)


# --- settings ---


def test_every_setting_has_a_description():
    missing = [ref_settings.env_name(n) for n, f in Settings.model_fields.items() if not (f.description or "").strip()]
    assert missing == [], f"settings without a description (a docstring under the field): {missing}"


def test_every_setting_has_an_entry_in_the_settings_reference():
    page = reference.expand("<!-- reference: settings -->")
    for name in Settings.model_fields:
        variable = ref_settings.env_name(name)
        assert f"### `{variable}` {{#{variable.lower()}}}" in page, variable
        assert f"[`{variable}`](#{variable.lower()})" in page, variable


def test_a_setting_without_a_description_stops_the_reference_and_the_example_file(monkeypatch):
    monkeypatch.setattr(Settings.model_fields["hold_bypass"], "description", None)
    for make in (ref_settings.settings_markdown, ref_settings.env_file):
        with pytest.raises(ref_settings.MissingDescription, match="NOTIFIER_HOLD_BYPASS"):
            make()


def test_the_example_settings_file_is_the_generated_one():
    written = (ROOT / "settings.example.env").read_text()
    assert written == ref_settings.env_file(), (
        "settings.example.env is not the settings model's: PYTHONPATH=. python docs/reference.py settings.example.env"
    )


def test_the_example_settings_file_shows_the_defaults():
    assert load_settings(str(ROOT / "settings.example.env")) == Settings()


# --- routes, the configuration file, the command line ---


def _served_routes() -> set[tuple[str, str]]:
    routes = {(r.method, r.resource.canonical) for r in create_app(Settings()).router.routes() if r.resource}
    return {route for route in routes if route[0] != "HEAD" and route != ref_http.CATCH_ALL}


def test_every_route_the_gateway_serves_has_a_reference_entry():
    documented = {(method, path) for method, path, _ in ref_http.operations()} | set(ref_http.OUTSIDE_OPENAPI)
    assert _served_routes() - documented == set(), "routes missing from the OpenAPI document (notifier/http/openapi.py)"
    page = reference.expand("<!-- reference: http -->")
    for method, path, _ in ref_http.operations():
        assert f"### `{method} {path}` {{#{ref_http.anchor(method, path)}}}" in page, (method, path)


def test_every_key_of_the_configuration_file_in_force_has_an_entry():
    page = reference.expand("<!-- reference: configuration -->")
    shown = [name for name in Config.model_fields if name not in NOT_YET]
    assert shown and all(f"| `{name}` |" in page for name in shown)
    for model, field in ref_config.LATER:  # a renamed field must not leave a stale entry behind
        assert any(m.__name__ == model and field in m.model_fields for m in _models()), (model, field)


def _models():
    return [v for v in vars(config_module).values() if isinstance(v, type) and issubclass(v, config_module._Part)]


def test_every_command_and_argument_has_help_and_an_entry():
    page = reference.expand("<!-- reference: cli -->")
    assert set(ref_cli.commands()) >= {"serve", "status", "check-config", "route", "mute", "maintenance"}
    for name in ref_cli.commands():
        assert f"### `notifier {name}` {{#notifier-{name}}}" in page, name


def test_an_unknown_marker_is_an_error():
    with pytest.raises(KeyError, match="no generated part named 'setting'"):
        reference.expand("<!-- reference: setting -->")


# --- the site ---


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built with `mkdocs build --strict` once for the tests of this part."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    mkdocs = Path(sys.executable).parent / "mkdocs"
    built_in = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(built_in)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return built_in


def test_the_site_builds_strictly(site):
    """`mkdocs build --strict`: a broken link or anchor, a page left out of the nav fail it."""
    settings_page = (site / "reference" / "settings" / "index.html").read_text()
    assert 'id="notifier_hold_bypass"' in settings_page and "<!-- reference" not in settings_page


# Where a page loads something: the src of these tags, the href of a <link> (an <a href> only links).
SOURCES = {"script", "img", "source", "iframe", "audio", "video", "embed", "input"}
NOT_LOADED = {"canonical", "alternate", "prev", "next"}  # a <link> naming a page, not fetching it
CSS_URL = re.compile(r"(?:@import\s+|url\()\s*[\"']?([^\"')\s]+)", re.IGNORECASE)


class _Loads(HTMLParser):
    """The addresses a page loads (its <link>, src and srcset, and url() in its inline CSS), in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refs: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        self._in_style = tag == "style"
        if tag == "link" and found.get("href") and not set(found.get("rel", "").lower().split()) & NOT_LOADED:
            self.refs.append(found["href"])
        if tag in SOURCES and found.get("src"):
            self.refs.append(found["src"])
        self.refs += [part.split()[0] for part in found.get("srcset", "").split(",") if part.strip()]
        self.refs += CSS_URL.findall(found.get("style", ""))

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        self.refs += CSS_URL.findall(data) if self._in_style else []


def test_every_page_loads_only_what_the_site_has(site):
    """A stylesheet, script, icon or image a page loads must be in the site (a too-wide exclude_docs once
    dropped the theme's CSS: every page rendered unstyled while the build passed), and nothing comes from
    another host (Google's fonts did, before theme.font: false)."""
    problems = []
    for page in sorted(site.rglob("*.html")):
        loads = _Loads()
        loads.feed(page.read_text())
        problems += [problem for ref in loads.refs for problem in _problem(site, page, ref)]
    for sheet in sorted(site.rglob("*.css")):
        problems += [
            problem
            for ref in CSS_URL.findall(sheet.read_text(errors="replace"))
            for problem in _problem(site, sheet, ref)
        ]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(sorted(set(problems))[:20])
    assert list(site.glob("assets/stylesheets/main.*.min.css")), "the theme's stylesheet is not in the site"
    assert list(site.glob("assets/javascripts/bundle.*.min.js")), "the theme's script is not in the site"


def test_the_check_of_what_a_page_loads_sees_every_way_of_loading(tmp_path):
    """The check above is only as good as what it finds: attributes in any order, every kind of load."""
    page = tmp_path / "index.html"
    page.write_text(
        '<link href="https://fonts.gstatic.com" rel="preconnect"><link rel="shortcut icon" href="icon.png">'
        '<link rel="canonical" href="https://example.org/"><script defer src="//cdn.example/x.js"></script>'
        '<img alt="a" srcset="a.png 1x, b.png 2x"><style>@import "https://fonts.example/f.css";</style>'
        '<a href="https://example.org/">a link, not a load</a>'
    )
    (tmp_path / "a.png").write_bytes(b"")
    loads = _Loads()
    loads.feed(page.read_text())
    found = [problem for ref in loads.refs for problem in _problem(tmp_path, page, ref)]
    assert found == [
        "index.html loads https://fonts.gstatic.com from another host",
        "index.html loads icon.png, which the site does not have",
        "index.html loads //cdn.example/x.js from another host",
        "index.html loads b.png, which the site does not have",
        "index.html loads https://fonts.example/f.css from another host",
    ]


def _problem(site: Path, page: Path, ref: str) -> list[str]:
    if ref.startswith(("data:", "#")):
        return []
    if re.match(r"(?:[a-z][a-z0-9+.-]*:)?//", ref, re.IGNORECASE):
        return [f"{page.relative_to(site)} loads {ref} from another host"]
    path = ref.split("#")[0].split("?")[0]
    target = (site / path.lstrip("/") if path.startswith("/") else page.parent / path).resolve()  # 404.html: absolute
    return [] if target.exists() else [f"{page.relative_to(site)} loads {ref}, which the site does not have"]


# --- the README ---


def _nav_pages(nav: object) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    items = nav.values() if isinstance(nav, dict) else nav if isinstance(nav, list) else []
    return set().union(*(_nav_pages(item) for item in items))


def _anchors(page: Path) -> set[str]:
    """The ids of a page's headings: an explicit {#id}, else mkdocs' slug of the heading's text."""
    ids = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(), re.MULTILINE):
        explicit = re.search(r"\{#([^}]+)\}\s*$", heading)
        ids.add(explicit.group(1) if explicit else slugify(heading.replace("`", ""), "-"))
    return ids


def test_the_readme_is_short_and_keeps_its_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    getting_started = (DOCS / "getting-started.md").read_text()
    for block in (QUICK_START, TEST_COMMAND):
        assert block in readme and block in getting_started, block


def test_the_readme_links_lead_to_pages_of_the_site():
    readme = (ROOT / "README.md").read_text()
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links
    for link in links:
        assert (ROOT / link).exists(), link
        assert link.endswith(".png") or link.removeprefix("docs/") in nav, link


def test_every_section_of_the_former_readme_lives_on_in_the_site():
    sections = yaml.safe_load((DOCS / "readme-sections.yml").read_text())
    assert len(sections) == 20  # the 19 sections of the README as the whole manual, and its Fair shares
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    for heading, places in sections.items():
        for place in places:
            page, _, anchor = place.partition("#")
            assert page in nav, (heading, page)
            assert not anchor or anchor in _anchors(DOCS / page), (heading, place)


CONFIG_KEYS = {"levels", "routes", "tokens", "templates", "destinations"}


def _config_examples() -> list[tuple[str, object]]:
    """Every YAML block of the README and the docs that is a configuration file (its keys are the file's)."""
    examples = []
    for page in (ROOT / "README.md", *sorted(DOCS.rglob("*.md"))):
        for block in re.findall(r"```ya?ml\n(.*?)```", page.read_text(), re.S):
            raw = yaml.safe_load(block)
            if isinstance(raw, dict) and raw and raw.keys() <= CONFIG_KEYS:
                examples.append((str(page.relative_to(ROOT)), raw))
    return examples


def test_every_configuration_file_the_docs_show_is_valid():
    """A reader copies them: each passes the checks `notifier check-config` runs."""
    examples = _config_examples()
    assert {place for place, _ in examples} >= {"README.md", "docs/concepts/limit-tree.md", "docs/concepts/tokens.md"}
    assert any("destinations" in raw for _, raw in examples)
    for place, raw in examples:
        # Destinations name their secrets' variables and files, which are not here: checked apart from them.
        config_module.parse_config(raw, place, None if "destinations" in raw else load_settings())
