"""`sam completion bash|zsh|fish`: the shell completion script (click's, for the `sam` group)."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

INSTALL = {
    "bash": 'eval "$(sam completion bash)"   # in ~/.bashrc',
    "zsh": 'eval "$(sam completion zsh)"    # in ~/.zshrc',
    "fish": "sam completion fish > ~/.config/fish/completions/sam.fish",
}


@click.command(epilog="Install: " + "; ".join(INSTALL.values()))
@click.argument("shell", type=click.Choice(sorted(INSTALL)))
def completion(shell: str) -> None:
    """Print the completion script for SHELL (commands, options, choices and file names)."""
    root = click.get_current_context().find_root()
    completion_class = get_completion_class(shell)
    if completion_class is None:  # click knows all three; a narrowed click would not
        raise click.UsageError(f"no completion for {shell}")
    script = completion_class(root.command, {}, "sam", "_SAM_COMPLETE").source()
    click.echo(script)
