"""`advisor plugins list`: which plugins loaded, which were blocked or failed."""

from __future__ import annotations

import click

from advisor.cli.common import EXIT_OK, debug_option, echo, guard
from advisor.plugin_manager import PluginHost


@click.group("plugins")
def plugins_group() -> None:
    """Inspect installed plugins."""


@plugins_group.command("list")
@debug_option
def plugins_list(debug: bool) -> None:
    """Show loaded, blocked and failed plugins with distribution and version.

    \b
    Example:
      ADVISOR_BLOCK_PLUGINS=msprof advisor plugins list
    """

    def body() -> int:
        host = PluginHost()
        readers = host.readers()
        for info in host.infos:
            echo(info.describe())
            for plugin, reader in readers:
                if plugin == info.name:
                    echo(f"    reader {reader.name}: {', '.join(reader.formats)}")
        return EXIT_OK

    guard(debug, body)
