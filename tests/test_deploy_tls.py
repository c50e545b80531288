"""A deployment's certificates (fedbound.deploy.tls): OpenSSL, through Python's ``ssl`` module, completes a
TLS handshake with the SuperLink's certificate when the client trusts the deployment's CA and checks the
host name, and refuses it under another CA or for a host the certificate does not name.  The CA's private
key is never written, and the SuperLink's key is readable by its owner only."""

from __future__ import annotations

import socket
import ssl
import stat
import threading

import pytest

pytest.importorskip("cryptography")

from fedbound.deploy.tls import main, make_certificates  # noqa: E402
from fedbound.errors import ParameterError  # noqa: E402


def _handshake(certs, cafile, host: str, connect_to: str = "127.0.0.1") -> str:
    """A TLS server on ``connect_to`` with the SuperLink's certificate; a client that trusts ``cafile``
    and expects ``host``; the negotiated protocol version (or the client's SSLError)."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(certs.cert, certs.key)
    family = socket.AF_INET6 if ":" in connect_to else socket.AF_INET
    listener = socket.socket(family)
    listener.bind((connect_to, 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cafile=str(cafile))
    try:
        with socket.create_connection((connect_to, port), timeout=10) as raw, \
                client_ctx.wrap_socket(raw, server_hostname=host) as tls:
            version = tls.version()
            tls.sendall(b"x")
            return version
    finally:
        thread.join(timeout=10)
        listener.close()


def test_the_superlink_certificate_verifies_against_the_deployment_ca_only(tmp_path):
    certs = make_certificates(tmp_path / "a", ["127.0.0.1", "localhost", "link.example.org"])
    assert _handshake(certs, certs.ca, "127.0.0.1").startswith("TLS")
    assert _handshake(certs, certs.ca, "localhost").startswith("TLS")
    assert _handshake(certs, certs.ca, "link.example.org").startswith("TLS")  # a name it carries
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch|match"):
        _handshake(certs, certs.ca, "other.example.org")
    other = make_certificates(tmp_path / "b")
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(certs, other.ca, "127.0.0.1")  # another deployment's CA does not vouch for it


def test_only_the_three_files_are_written_and_the_key_is_private(tmp_path):
    certs = make_certificates(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "server.key", "server.pem"]
    assert stat.S_IMODE(certs.key.stat().st_mode) == 0o600
    assert "PRIVATE KEY" not in certs.ca.read_text() + certs.cert.read_text()
    loaded = ssl._ssl._test_decode_cert(str(certs.cert))  # OpenSSL's own parse of the certificate
    names = {v for k, v in loaded["subjectAltName"]}
    assert {"127.0.0.1", "localhost"} <= names and any(n.startswith("0:0:0:0:0:0:0:1") for n in names)


def test_bad_hosts_and_the_command_line(tmp_path, capsys):
    with pytest.raises(ParameterError, match="host"):
        make_certificates(tmp_path, ["has space"])
    with pytest.raises(ParameterError, match="days"):
        make_certificates(tmp_path, days=0)
    assert main([str(tmp_path / "c"), "10.1.2.3", "link.internal"]) == 0
    assert "CA certificate" in capsys.readouterr().out
    assert _handshake(make_certificates(tmp_path / "d", ["10.1.2.3"]), tmp_path / "d" / "ca.crt",
                      "10.1.2.3", connect_to="127.0.0.1").startswith("TLS")
    assert main([str(tmp_path / "e")]) == 2
    assert "usage" in capsys.readouterr().err
