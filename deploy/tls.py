"""TLS certificates for a Flower deployment: a certificate authority made for the deployment, and the
SuperLink's certificate signed by it.

Flower 1.42 serves the SuperLink's Fleet, Control and Runtime APIs over one HTTPS port; the SuperLink
takes ``--ssl-ca-certfile``, ``--ssl-certfile`` and ``--ssl-keyfile``, and every SuperNode and the ``flwr``
CLI verify it against the CA certificate (``--root-certificates``; ``root-certificates`` in Flower's
configuration).  :func:`make_certificates` writes the three files: ``ca.crt`` (public: copy it to every
SuperNode host and wherever ``flwr run`` runs), ``server.pem`` and ``server.key`` (the SuperLink's; the key
owner-only, it never leaves the SuperLink host).  The CA's private key is never written: it signs the one
server certificate in memory and is dropped, so no one can issue another certificate the deployment would
trust.  The server certificate names every host the SuperNodes may use to reach the SuperLink (its
subject alternative names: IP addresses and DNS names), and is valid for ``days`` days.

From a shell (docs/guides/flower.md, "Across machines")::

    python -m fedbound.deploy.tls CERT_DIR HOST [HOST ...]

Keys: ECDSA on P-256 (NIST FIPS 186-5), signatures with SHA-256, through the ``cryptography`` package
Flower itself depends on.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from fedbound.errors import ParameterError

__all__ = ["Certificates", "make_certificates", "LOCAL_HOSTS"]

LOCAL_HOSTS = ("127.0.0.1", "::1", "localhost")
"""The names a SuperLink on this machine is reached by."""


@dataclass(frozen=True)
class Certificates:
    """Paths of a deployment's certificate files."""

    ca: Path
    cert: Path
    key: Path


def _names(hosts: list[str]) -> list:
    from cryptography import x509

    names = []
    for host in dict.fromkeys(hosts):
        text = str(host).strip()
        if not text or any(c.isspace() for c in text) or len(text) > 253:
            raise ParameterError("host", host, "an IP address or a DNS name (no spaces, at most 253 "
                                 "characters)")
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(text.strip("[]"))))
        except ValueError:
            names.append(x509.DNSName(text))
    return names


def make_certificates(folder: str | os.PathLike, hosts: list[str] | tuple[str, ...] = LOCAL_HOSTS,
                      days: int = 30) -> Certificates:
    """Write ``ca.crt``, ``server.pem`` and ``server.key`` into ``folder`` (module docstring): a CA made for
    this deployment and the SuperLink's certificate for ``hosts``, valid for ``days`` days."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if not 1 <= int(days) <= 3650:
        raise ParameterError("days", days, "[1, 3650]")
    alt = x509.SubjectAlternativeName(_names(list(hosts)))
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)  # clocks a little apart still agree
    until = now + dt.timedelta(days=int(days))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedbound deployment CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, encipher_only=False,
                                       decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    first = str(list(hosts)[0]) if hosts else "fedbound"
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, first[:64])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(until)
            .add_extension(alt, critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = Certificates(folder / "ca.crt", folder / "server.pem", folder / "server.key")
    out.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(out.key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    os.chmod(out.key, 0o600)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m fedbound.deploy.tls CERT_DIR HOST [HOST ...]``: the three files, their paths printed."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m fedbound.deploy.tls CERT_DIR HOST [HOST ...]  (HOST: the SuperLink's IP "
              "address or DNS name, as the SuperNodes reach it)", file=sys.stderr)
        return 2
    try:
        made = make_certificates(args[0], args[1:])
    except (ParameterError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"CA certificate (copy to every SuperNode and flwr host): {made.ca}\n"
          f"SuperLink certificate: {made.cert}\nSuperLink key (stays on the SuperLink host): {made.key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
