"""``fedbound serve``: the design explorer, a local web page over every registered paper
(:mod:`fedbound.explorer`; needs the ``explorer`` extra)."""

from __future__ import annotations

from typing import Annotated

import typer

LOCAL = "127.0.0.1"


def _check_port(port: int) -> int:
    from fedbound.checks import check_int

    return int(check_int("--port", port, 0, 65535))


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("serve")
    def serve(
        port: Annotated[int, typer.Option("--port", help="TCP port, 0..65535 (0: any free port)")] = 8765,
        host: Annotated[str, typer.Option("--host", help="address to bind; the default serves this machine "
                                                         "only (another address exposes the page to the "
                                                         "network)")] = LOCAL,
        open_browser: Annotated[bool, typer.Option("--open", help="open the page in the default browser")]
        = False,
    ) -> None:
        """The design explorer: move eps, N, K, T ... and watch sigma, the bound, T* and every warning, for
        every paper (a local web page; the API behind it is the CLI's JSON, documented at /docs)."""
        import socket

        from fedbound.errors import ConfigError

        port = _check_port(port)
        try:
            import uvicorn

            from fedbound.explorer.app import create_app
        except ImportError as exc:
            from fedbound.extras import install_command

            raise ConfigError(f"fedbound serve needs the explorer extra ({exc.name} is missing): "
                              f"{install_command('explorer')}") from None
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(2048)  # connections wait in the backlog until uvicorn accepts: the URL works at once
        except (OSError, OverflowError) as exc:
            sock.close()
            raise ConfigError(f"--host {host!r} --port {port}: cannot listen there "
                              f"({getattr(exc, 'strerror', None) or exc})") from None
        url = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}/"
        typer.echo(f"fedbound explorer on {url} (API documentation: {url}docs); Ctrl-C stops it")
        if open_browser:
            import webbrowser

            webbrowser.open(url)
        server = uvicorn.Server(uvicorn.Config(create_app(), log_level="warning"))
        server.run(sockets=[sock])
