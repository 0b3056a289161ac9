"""A throw-away certificate authority for TLS tests, made with the ``cryptography`` package.

>>> import tempfile
>>> pki = make_pki(tempfile.mkdtemp())
>>> sorted(p.name for p in (pki.ca_cert, pki.server_cert, pki.server_key, pki.client_cert, pki.client_key))
['ca.pem', 'client-key.pem', 'client.pem', 'server-key.pem', 'server.pem']
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki", "make_pki"]


@dataclass(frozen=True)
class Pki:
    """PEM files: a CA, a server certificate for 127.0.0.1/localhost/::1 and a client certificate, both CA-signed."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def _issue(
    subject: str,
    issuer_key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    *,
    usage: x509.ObjectIdentifier,
    names: list[x509.GeneralName],
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256()), key


def make_pki(directory: str | Path) -> Pki:
    """Write a fresh CA, server and client certificate with their keys under ``directory``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    ca_name = _name("avro-registry-sink test CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server, server_key = _issue(
        "localhost",
        ca_key,
        ca_name,
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        names=[
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ],
    )
    client, client_key = _issue("registry-test-client", ca_key, ca_name, usage=ExtendedKeyUsageOID.CLIENT_AUTH, names=[])
    pki = Pki(
        ca_cert=out / "ca.pem",
        server_cert=out / "server.pem",
        server_key=out / "server-key.pem",
        client_cert=out / "client.pem",
        client_key=out / "client-key.pem",
    )
    pki.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.server_cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    pki.client_cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))
    _write_key(server_key, pki.server_key)
    _write_key(client_key, pki.client_key)
    return pki
