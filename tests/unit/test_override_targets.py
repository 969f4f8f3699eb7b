"""What an override addresses is exactly the level value given: no value can be read back as the
root or as another level's, the mute control mutes a category or nothing, and rules stay within
what the store's integers hold."""

from __future__ import annotations

import pytest
import yaml

from notifier.config import load_config, parse_config
from notifier.errors import ConfigError
from notifier.http.app import create_app
from notifier.policy import Policy, override_field, override_target
from notifier.rules import parse_rules
from notifier.settings import load_settings

ROOT_ONLY = "levels: [{name: global, rules: 10/1m}]"
NO_CATEGORY = "levels: [{name: global, rules: 10/1m}, {name: channel, key: channel, rules: 5/1m}]"
CATEGORY_BY_FIELD = """
levels:
  - {name: all, rules: 100/1m}
  - {name: category, key: "field:svc", rules: 10/1m}
  - {name: cat, key: category, rules: 5/1m}
"""


def policy(text: str | None = None) -> Policy:
    if text is None:
        return Policy.from_settings(load_settings())
    return Policy.from_settings(load_settings(), parse_config(yaml.safe_load(text)))


@pytest.mark.parametrize("root", ["global", "all"])
@pytest.mark.parametrize(
    "target",
    [("category", "db"), ("category", "global"), ("category", "all"), ("category", "team=db"), ("team", "a=b")],
)
def test_every_target_is_read_back_as_itself(root, target):
    field = override_field(target, root)
    assert override_target(field, root) == target
    assert override_target(override_field((root, ""), root), root) == (root, "")


def test_a_category_s_override_keeps_its_field_of_before_the_tree():
    assert override_field(("category", "db"), "global") == "db"  # overrides stored by earlier versions


def test_the_mute_control_mutes_the_level_named_category_else_the_lowest_never_the_root():
    assert policy().mute_target("db") == ("category", "db")
    assert policy(ROOT_ONLY).mute_target("db") is None  # not the root: that would mute everything
    assert policy(NO_CATEGORY).mute_target("db") == ("channel", "db")  # the lowest level, as the contract says
    assert policy(CATEGORY_BY_FIELD).mute_target("db") == ("category", "db")  # the level named category


@pytest.fixture
def make_client(aiohttp_client, tmp_path):
    async def make(text: str | None = None):
        config = None
        if text:
            path = tmp_path / "notifier.yaml"
            path.write_text(text)
            config = load_config(str(path), load_settings())
        app = create_app(load_settings(digest_interval=0), *([config] if config else []))
        return await aiohttp_client(app)

    return make


async def post(client, category: str, **fields: str) -> int:
    return (await client.post("/v1/events", json={"category": category, "text": "x", "fields": fields})).status


@pytest.mark.parametrize(
    ("text", "address"), [(None, "/v1/limits/category/global"), (CATEGORY_BY_FIELD, "/v1/limits/category/all")]
)
async def test_overriding_a_value_named_as_the_root_does_not_override_the_root(make_client, text, address):
    client = await make_client(text)
    assert (await client.put(address, json={"rules": "0/1h"})).status == 200
    assert await post(client, "db", svc="x") == 202  # the root was not muted
    assert await post(client, "all" if text else "global") == 422  # the root's name is no category


async def test_overriding_a_value_holding_an_equals_sign_overrides_that_value(make_client):
    client = await make_client(CATEGORY_BY_FIELD.replace("cat, key: category", 'team, key: "field:team"'))
    assert (await client.put("/v1/limits/category/team=db", json={"rules": "0/1h"})).status == 200
    assert await post(client, "web", svc="x", team="db") == 202  # not team=db
    assert await post(client, "web", svc="team=db") == 429  # but the value addressed


OTHER_DIGITS = ["\uff11/1m", "1/\u0663m", "\u00b2/1m"]  # a full-width 1, an Arabic-Indic 3, a superscript 2


@pytest.mark.parametrize("rules", ["1/1000000000000000s", "1/367d", "10000000000/1m", *OTHER_DIGITS])
def test_rules_beyond_the_store_s_integers_or_in_other_digits_are_refused(rules):
    with pytest.raises(ValueError, match=r"COUNT/DURATION|at most|not a duration"):
        parse_rules(rules)


def test_the_longest_rules_allowed_parse():
    assert parse_rules("1000000000/366d")[0].window_ms == 366 * 86_400_000


@pytest.mark.parametrize("key", ["[1]", "{a: 1}"])
def test_a_list_or_a_mapping_as_a_key_is_one_line_naming_its_place(tmp_path, key):
    path = tmp_path / "notifier.yaml"
    path.write_text(f"levels:\n  - name: global\n    rules: 10/1m\n    values: {{{key}: 2/1s}}\n")
    with pytest.raises(ConfigError, match=r"line 4.*a key must be a plain value"):
        load_config(str(path), load_settings())


def test_yaml_merge_keys_are_read(tmp_path):
    path = tmp_path / "notifier.yaml"
    path.write_text(
        "levels:\n"
        "  - {name: global, rules: 100/1m}\n"
        "  - &team {name: team, key: 'field:team', rules: 10/1m}\n"
        "  - {<<: *team, name: category, key: category}\n"
    )
    config = load_config(str(path), load_settings())
    assert [(level.name, level.key, level.rules[0].text) for level in config.levels or []][1:] == [
        ("team", "field:team", "10/1m"),
        ("category", "category", "10/1m"),
    ]
