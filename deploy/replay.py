"""What a deployed party keeps on its own disk so that a round repeated after a crash releases nothing new.

Noise from the OS CSPRNG (:mod:`fedbound.training.secure_noise`) is fresh at every draw, so answering a
round twice would release two independently noised copies of one update: a release the ledger, which
counts each round once, never counted.  Each party therefore keeps what it released, per run:

* :class:`UploadStore` (a client): the noised upload of every round it answered, stored (atomically,
  fsync'd) *before* the reply leaves, with a digest of the request it answered.  The same request again
  (the server resumed the round from its checkpoint: same round, model and noise std) gets the same bytes
  back; another request for an answered round is refused (answering it would release fresh noise on the
  same data, uncounted).  Only the newest round's upload is kept in full: a request for round t means the
  server checkpointed round t - 1, so an earlier round is never legitimately asked again, and of those only
  the request digest stays (enough to refuse);
* :func:`party_secret` (the server): 32 bytes from the OS CSPRNG, created once per run next to its
  checkpoint, that key the server's participant sampling: a repeated round asks the same clients (whose
  kept uploads it gets again), and no one without the secret (the clients hold the run seed) can tell who
  was sampled.

Plain files (``numpy`` ``.npz`` without pickles, JSON), no Flower: a SuperNode or SuperLink in its own
process, or a simulation, uses them alike.  A run is named by :func:`run_id` of its run config.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedbound.errors import ConfigError

__all__ = ["UploadStore", "Kept", "run_id", "request_digest", "party_secret", "SECRET_FILE"]

SECRET_FILE = "flower-server-secret"
"""The server's secret, in its run directory (not a file ``fedbound train`` writes or overwrites)."""


def run_id(cfg: Mapping[str, Any]) -> str:
    """The run a run config describes: its paper, effective configuration, run directory and noise mode
    (a resumed run keeps all four; a new run directory is a new run)."""
    parts = [str(cfg.get(k, "")) for k in ("fedbound.paper", "fedbound.config", "fedbound.run-dir",
                                            "fedbound.reproducible-noise")]
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=12).hexdigest()


def request_digest(start: np.ndarray, conf: Mapping[str, Any]) -> str:
    """A digest of one train request: the model it starts from (dtype, shape, bytes) and its config record
    (round, client, private, the noise std per stage)."""
    h = hashlib.blake2b(digest_size=16)
    arr = np.ascontiguousarray(start)
    h.update(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(arr.tobytes())
    h.update(json.dumps({str(k): conf[k] for k in sorted(conf)}, sort_keys=True, default=str).encode())
    return h.hexdigest()


def _write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` (permissions ``mode`` from the start) so that a crash leaves the old file
    or the new one, never a torn one."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class Kept:
    """A kept answer: the upload array and the metrics the reply carried."""

    def __init__(self, upload: np.ndarray, metrics: dict[str, Any], replayed: bool) -> None:
        self.upload, self.metrics, self.replayed = upload, metrics, replayed


class UploadStore:
    """One client's kept uploads under ``root`` (module docstring): ``root/<run>/client-<i>/``."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def _folder(self, run: str, client: int) -> Path:
        return self.root / run / f"client-{int(client):06d}"

    def answer(self, run: str, round_: int, client: int, digest: str, compute) -> Kept:
        """The kept answer to this request, or ``compute()`` -> ``(upload, metrics)`` kept first, then
        returned; a ConfigError for another request on an answered round."""
        folder = self._folder(run, client)
        full, answered = folder / f"round-{round_:06d}.npz", folder / f"round-{round_:06d}.answered"
        if full.is_file():
            kept, seen = self._load(full)
            if seen != digest:
                raise self._refusal(round_, client)
            return kept
        if answered.is_file():
            raise self._refusal(round_, client)
        upload, metrics = compute()
        upload = np.ascontiguousarray(upload)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            buf = io.BytesIO()
            np.savez(buf, upload=upload, digest=np.frombuffer(digest.encode(), np.uint8),
                     metrics=np.frombuffer(json.dumps(metrics).encode(), np.uint8))
            _write_atomic(full, buf.getvalue())
            self._forget_before(folder, round_)
        except OSError as exc:
            raise ConfigError(f"the client's upload store {str(self.root)!r} cannot be written "
                              f"({exc.strerror or exc}): the client refuses to release an upload it "
                              "cannot keep (a repeated round would release fresh noise)") from None
        return Kept(upload, dict(metrics), replayed=False)

    @staticmethod
    def _load(path: Path) -> tuple[Kept, str]:
        with np.load(path, allow_pickle=False) as z:
            digest = z["digest"].tobytes().decode()
            metrics = json.loads(z["metrics"].tobytes().decode())
            return Kept(np.array(z["upload"]), metrics, replayed=True), digest

    @staticmethod
    def _forget_before(folder: Path, round_: int) -> None:
        """Replace the full uploads of rounds before ``round_`` by their request digests."""
        for old in folder.glob("round-*.npz"):
            done = int(old.stem.split("-")[1])
            if done < round_:
                _, digest = UploadStore._load(old)
                _write_atomic(old.with_suffix(".answered"), digest.encode())
                old.unlink()

    @staticmethod
    def _refusal(round_: int, client: int) -> ConfigError:
        return ConfigError(f"client {client} already answered round {round_ + 1} of this run for another "
                           "request (another model or noise std): answering again would release fresh noise "
                           "on the same data that the ledger does not count; start a new run (a new run "
                           "directory) to train again")


def party_secret(folder: str | os.PathLike, run_key: str) -> bytes:
    """The server's 32-byte secret for run ``run_key``, created from the OS CSPRNG on first use and kept in
    ``folder/SECRET_FILE`` (owner-only); a file of another run is replaced."""
    from fedbound.training.secure_noise import new_secret

    path = Path(folder) / SECRET_FILE
    tag = hashlib.blake2b(run_key.encode(), digest_size=16).hexdigest()
    if path.is_file():
        text = path.read_text().split()
        if len(text) == 2 and text[0] == tag:
            return bytes.fromhex(text[1])
    secret = new_secret()
    _write_atomic(path, f"{tag} {secret.hex()}\n".encode(), mode=0o600)
    return secret
