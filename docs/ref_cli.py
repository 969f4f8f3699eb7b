"""The command-line reference, generated from the argparse parser of ``notifier`` (``notifier.cli._parser``).

Every command becomes an entry with its usage and a table of its arguments. A command or an
argument without help text is an error here.
"""

from __future__ import annotations

import argparse

from ref_settings import MissingDescription

from notifier.cli import _parser


def commands(parser: argparse.ArgumentParser | None = None) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """Command name -> (its help, its parser), in the order ``notifier --help`` lists them."""
    parser = parser or _parser()
    found: dict[str, tuple[str, argparse.ArgumentParser]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found[name] = (helps.get(name, ""), sub)
    return found


def _argument(command: str, action: argparse.Action) -> str:
    shown = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.metavar or action.dest}`"
    if action.option_strings and action.nargs != 0:
        shown += f" `{action.metavar or action.dest.upper()}`"
    if not action.help:
        raise MissingDescription(f"notifier {command}: {shown} has no help in notifier/cli.py")
    default = action.default
    said = action.help + (f" (default: `{default}`)" if default not in (None, False, [], argparse.SUPPRESS) else "")
    cell = " ".join(said.split()).replace("|", "\\|")
    return f"| {shown} | {cell} |"


def cli_markdown() -> str:
    """``notifier``'s commands: the list, then an entry per command."""
    table = ["| command | what it does |", "|---|---|"]
    entries = []
    for name, (help_text, sub) in commands().items():
        if not help_text:
            raise MissingDescription(f"notifier {name} has no help in notifier/cli.py")
        table.append(f"| [`notifier {name}`](#notifier-{name}) | {help_text} |")
        usage = " ".join(sub.format_usage().removeprefix("usage: ").split())
        # An argument with its help suppressed is not the user's (``serve --worker-of``: set by the parent).
        arguments = [a for a in sub._actions if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS]
        rows = ["| argument | meaning |", "|---|---|", *(_argument(name, a) for a in arguments)]
        entries.append(
            "\n".join(
                [
                    f"### `notifier {name}` {{#notifier-{name}}}",
                    "",
                    help_text[0].upper() + help_text[1:] + ".",
                    "",
                    "```",
                    usage,
                    "```",
                    "",
                    *rows,
                    "",
                ]
            )
        )
    return "\n".join([*table, "", *entries])
