"""``kgpu completion bash|zsh|fish``, and ``kubectl_complete-gpu`` for ``kubectl gpu <TAB>``.

The shell scripts are click's: they call ``kgpu`` back with ``_KGPU_COMPLETE`` set, so completions always
match the installed version. kubectl (1.26+) completes a plugin's arguments by running an executable
named ``kubectl_complete-<plugin>`` with the words typed after ``kubectl gpu`` (the last one being the word
under the cursor) and reading Cobra's protocol back: one candidate per line, ``value<TAB>description``,
then ``:<directive>``. Directive 4 (ShellCompDirectiveNoFileComp) when kgpu offers candidates, 0 (the
shell's own file completion) for options that take a path, such as ``-f``.

Both complete the root command (``kgpu.cli.root``), not the entry point that runs it, so the entry point may
hand ``kubectl_complete-gpu`` calls here without an import circle. Contexts and namespaces come from the
kubeconfig (``kgpu.cli.cluster_flags``), offline.
"""

from __future__ import annotations

import sys

import click

from kgpu.cli.output import examples

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_KGPU_COMPLETE"
NO_FILE_COMP = 4
DEFAULT_COMP = 0


@click.command(
    "completion",
    epilog=examples(
        ("bash: load completion into this shell", "source <(kgpu completion bash)"),
        ("zsh: install for every new shell", 'kgpu completion zsh > "${fpath[1]}/_kgpu"'),
        ("fish", "kgpu completion fish > ~/.config/fish/completions/kgpu.fish"),
    ),
)
@click.argument("shell", type=click.Choice(SHELLS))
def command(shell: str) -> None:
    """Print the shell completion script for bash, zsh or fish.

    Verbs, options, choices (templates, targets, output formats), file paths after -f, and --context
    and -n from your kubeconfig complete.
    For `kubectl gpu <TAB>`, kubectl 1.26+ runs `kubectl_complete-gpu`, installed beside `kubectl-gpu`.
    """
    from click.shell_completion import get_completion_class

    from kgpu.cli.root import cli

    cls = get_completion_class(shell)
    assert cls is not None  # click ships all three
    click.echo(cls(cli, {}, "kgpu", COMPLETE_VAR).source())


def kubectl_candidates(words: list[str]) -> tuple[list[str], int]:
    """Cobra-protocol lines and directive for the words after ``kubectl gpu`` (last: the incomplete word)."""
    from click.shell_completion import ShellComplete

    from kgpu.cli.root import cli

    args, incomplete = (words[:-1], words[-1]) if words else ([], "")
    items = ShellComplete(cli, {}, "kubectl gpu", COMPLETE_VAR).get_completions(args, incomplete)
    if any(item.type in ("file", "dir") for item in items):
        return [], DEFAULT_COMP
    lines = [f"{item.value}\t{item.help}" if item.help else str(item.value) for item in items]
    return lines, NO_FILE_COMP


def kubectl_complete() -> None:
    """Entry point of ``kubectl_complete-gpu``."""
    try:
        lines, directive = kubectl_candidates(sys.argv[1:])
    except Exception:  # completion must never print a traceback into the user's shell
        lines, directive = [], 1  # ShellCompDirectiveError
    text = "".join(line.replace("\n", " ") + "\n" for line in lines) + f":{directive}\n"
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        pass
