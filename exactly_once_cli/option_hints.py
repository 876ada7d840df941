"""Where an option belongs, for a "No such option" that only put it in the wrong place.

Global options (--region, --endpoint-url, --profile) go before the command name and a
command's own options (--stack, --json) after it; click only says the option does not exist
where it was given. The hint names the place it does exist: `eonce --region X locks list`, or
the commands that take it.
"""

from __future__ import annotations

from typer import _click  # typer 0.29 vendors click; its context and command types live here
from typer.core import TyperGroup

PROGRAM = "eonce"
ARGS_META = "eonce.args"
"""Context meta (shared by every context of a run): the words given after `eonce`."""


def _options(command: _click.Command) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def _named_in(words: list[str], given: list[str]) -> bool:
    """Whether the command's words (`locks list`) were given, in order, among the arguments."""
    rest = iter(given)
    return all(word in rest for word in words)


def _commands_taking(group: TyperGroup, ctx: _click.Context, option: str, path: str) -> list[str]:
    """The path of every command under `group` whose own options include `option`."""
    found: list[str] = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        if option in _options(command):
            found.append(f"{path} {name}")
        if isinstance(command, TyperGroup):
            found += _commands_taking(command, ctx, option, f"{path} {name}")
    return found


def option_hint(exc: _click.exceptions.NoSuchOption) -> str:
    """ "; X goes ..." naming where `exc.option_name` belongs, or "" when no command takes it."""
    ctx, option = exc.ctx, exc.option_name
    if ctx is None:
        return ""
    root = ctx.find_root()
    # as the console script names itself (a test runner's program name is "root")
    path = " ".join([PROGRAM, *ctx.command_path.split()[1:]])
    if ctx is not root and option in _options(root.command):
        rest = path.partition(" ")[2]
        return (
            f"; {option} is a global option: give it before the command, "
            f"as `{PROGRAM} {option} ... {rest} ...`"
        )
    if not isinstance(ctx.command, TyperGroup):
        return ""
    taking = _commands_taking(ctx.command, ctx, option, path)
    if not taking:
        return ""
    given = list(ctx.meta.get(ARGS_META, ()))
    named = [where for where in taking if _named_in(where[len(path) :].split(), given)]
    if len(named) == 1:
        return f"; {option} is an option of `{named[0]}`: give it after `{named[0]}`"
    first = [where for where in taking if where[len(path) :].split()[0] in given]
    taking = first or taking  # `eonce --stack X replay NAME`: replay's commands
    shown = ", ".join(f"`{where}`" for where in taking[:4])
    more = f" and {len(taking) - 4} more" if len(taking) > 4 else ""
    return f"; {option} is an option of {shown}{more}: give it after the command name"
