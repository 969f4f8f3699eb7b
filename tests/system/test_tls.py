"""TLS to Redis: ``rediss://`` against Debian's redis-server accepting TLS only, with a CA made per run.

The options are redis-py's, read from the URL (``ssl_ca_certs``, ``ssl_certfile``,
``ssl_keyfile``). A server whose certificate the given CA did not sign, or a client
certificate the server's CA did not sign, never gets a ``202``, and ``/readyz`` says
why (the TLS error) from the first failed connection for as long as it lasts.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import time
from pathlib import Path
from typing import NamedTuple

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from helpers import Gateway, RedisServer, free_port

EVENT = {"category": "tls", "text": "over TLS"}
STILL = 2.0  # seconds a failure is watched to last


class Pair(NamedTuple):
    """A certificate and its key, as files."""

    cert: Path
    key: Path


class Authority:
    """A certificate authority of the test's own, and what it signs."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder, self.name = folder, name
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} test CA")])
        self.subject = subject
        self.cert = (
            _builder(subject, subject, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
            )  # digital signature, certificate and CRL signing
            .sign(self.key, hashes.SHA256())
        )
        self.path = folder / f"{name}-ca.crt"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, role: str, server: bool) -> Pair:
        """A certificate for ``127.0.0.1``/``localhost`` (a server's) or a client's, signed by this CA."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{self.name} {role}")])
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = _builder(subject, self.subject, key.public_key()).add_extension(
            x509.ExtendedKeyUsage([usage]), critical=False
        )
        if server:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        pair = Pair(self.folder / f"{self.name}-{role}.crt", self.folder / f"{self.name}-{role}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return pair


def _builder(subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


class TlsRedis(RedisServer):
    """redis-server with its plain port off (``--port 0``): TLS only, on ``tls_port``."""

    def __init__(self, ca: Authority, server: Pair, client: Pair, auth_clients: bool) -> None:
        self.tls_port = free_port()
        self.ca, self.client = ca, client
        super().__init__(
            extra=[
                *("--port", "0", "--tls-port", str(self.tls_port)),
                *("--tls-cert-file", str(server.cert), "--tls-key-file", str(server.key)),
                *("--tls-ca-cert-file", str(ca.path), "--tls-auth-clients", "yes" if auth_clients else "no"),
            ]
        )

    def ping(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.ca.path))
        context.load_cert_chain(str(self.client.cert), str(self.client.key))
        try:
            with (
                socket.create_connection(("127.0.0.1", self.tls_port), timeout=0.5) as raw,
                context.wrap_socket(raw, server_hostname="127.0.0.1") as sock,
            ):
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def url(self, ca: Path, client: Pair | None = None) -> str:  # type: ignore[override]
        query = f"ssl_ca_certs={ca}"
        if client is not None:
            query += f"&ssl_certfile={client.cert}&ssl_keyfile={client.key}"
        return f"rediss://127.0.0.1:{self.tls_port}/0?{query}"


class Parts(NamedTuple):
    ca: Authority
    rogue: Authority  # a CA the server does not know, with a server and a client certificate of its own
    client: Pair
    rogue_client: Pair


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> Parts:
    folder = tmp_path_factory.mktemp("tls")
    ca, rogue = Authority(folder, "ours"), Authority(folder, "rogue")
    return Parts(ca, rogue, ca.issue("client", server=False), rogue.issue("client", server=False))


@pytest.fixture(scope="module")
def servers(parts):
    """Two TLS-only redis-servers: ``False`` asks clients for no certificate, ``True`` for one of its CA's."""
    started = {}
    try:
        for asks in (False, True):
            server = TlsRedis(parts.ca, parts.ca.issue("server", server=True), parts.client, asks)
            started[asks] = server.start()
        yield started
    finally:
        for server in started.values():
            server.stop()


def _gateway(url: str, tmp_path: Path, prefix: str, ready: bool = True) -> Gateway:
    env = {"NOTIFIER_REDIS_URL": url, "NOTIFIER_KEY_PREFIX": prefix, "NOTIFIER_DIGEST_INTERVAL": "0"}
    return Gateway(env, log_dir=str(tmp_path)).start(ready=ready)


BOTH = pytest.mark.parametrize("asks", [False, True], ids=["no-client-certificate", "client-certificate"])


@BOTH
def test_events_are_admitted_over_tls_with_the_ca(servers, parts, tmp_path, asks):
    server = servers[asks]
    gateway = _gateway(server.url(parts.ca.path, parts.client if asks else None), tmp_path, f"tls-ok-{asks}")
    try:
        status, body, _ = gateway.post(EVENT)
        assert status == 202, body
        assert gateway.get("/readyz")[0] == 200
        assert gateway.get("/v1/stats")[1]["accepted"] == 1
    finally:
        gateway.stop()


def _refused_for_as_long_as_it_lasts(gateway: Gateway, reason: str) -> None:
    """No ``202``, and ``/readyz`` ``503`` naming ``reason``, from the first answer on, for ``STILL`` seconds."""
    deadline = time.monotonic() + STILL
    while time.monotonic() < deadline:
        status, body, _ = gateway.post(EVENT)
        assert status == 503, body
        status, body, _ = gateway.get("/readyz")
        assert status == 503 and reason in body["error"].lower(), body
        time.sleep(0.1)


@BOTH
def test_a_server_certificate_the_ca_did_not_sign_never_gets_a_202(servers, parts, tmp_path, asks):
    url = servers[asks].url(parts.rogue.path, parts.client if asks else None)
    gateway = _gateway(url, tmp_path, "tls-rogue-ca", ready=False)
    try:
        _refused_for_as_long_as_it_lasts(gateway, "certificate verify failed")
    finally:
        gateway.stop()


@pytest.mark.parametrize(("client", "reason"), [("rogue", "unknown ca"), ("none", "certificate required")])
def test_a_client_certificate_the_server_ca_did_not_sign_never_gets_a_202(servers, parts, tmp_path, client, reason):
    """The server refuses the handshake; its TLS alert is what ``/readyz`` says."""
    url = servers[True].url(parts.ca.path, parts.rogue_client if client == "rogue" else None)
    gateway = _gateway(url, tmp_path, f"tls-client-{client}", ready=False)
    try:
        _refused_for_as_long_as_it_lasts(gateway, reason)
    finally:
        gateway.stop()
