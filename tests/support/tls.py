"""A throw-away certificate authority for tests: a CA and certificates it signs, as PEM files."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class TlsFiles:
    """PEM paths of a CA certificate and a client certificate/key it signed."""

    ca: Path
    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_tls_files(directory: Path, *, common_name: str = "client", key_password: str | None = None,
                   traditional_key: bool = False) -> TlsFiles:
    """Make a fresh CA and a certificate for ``common_name`` (also valid for 127.0.0.1/localhost) in ``directory``.

    The key is PKCS#8 PEM, encrypted with ``key_password`` if given; ``traditional_key`` writes the
    OpenSSL traditional (``BEGIN EC PRIVATE KEY``) form instead.
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder().subject_name(_name("test-ca")).issuer_name(_name("test-ca"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    encryption = (serialization.BestAvailableEncryption(key_password.encode()) if key_password
                  else serialization.NoEncryption())
    form = serialization.PrivateFormat.TraditionalOpenSSL if traditional_key else serialization.PrivateFormat.PKCS8
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, form, encryption))
    return files
