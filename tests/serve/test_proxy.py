"""docs/serve.md's nginx example, run for real: TLS at the proxy, the server on 127.0.0.1 behind it,
``Secure`` cookies under an https ``public_url``, and plain HTTP redirected to https."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from grader.serve.app import create_app
from grader.serve.db import Audit
from grader.serve.invites import RosterEntry, invite
from grader.serve.state import open_state
from grader.serve.testing import free_port, run_server

from .conftest import ROOT, csrf, make_settings

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "serve.md"


def nginx_example() -> str:
    """The nginx block of docs/serve.md, as published."""
    text = DOC.read_text(encoding="utf-8")
    found = re.search(r"```nginx\n(.*?)```", text, re.S)
    assert found is not None, "docs/serve.md has no nginx example"
    return found.group(1)


def self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "grader.example.edu")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("grader.example.edu")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "fullchain.pem", folder / "privkey.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def test_the_nginx_example_proxies_tls_to_the_server(tmp_path: Path) -> None:
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx-light)")
    cert, key = self_signed(tmp_path)
    app_port, tls_port, plain_port = free_port(), free_port(), free_port()
    block = (
        nginx_example()
        .replace("listen 443 ssl;", f"listen 127.0.0.1:{tls_port} ssl;")
        .replace("listen 80;", f"listen 127.0.0.1:{plain_port};")
        .replace("/etc/letsencrypt/live/grader.example.edu/fullchain.pem", str(cert))
        .replace("/etc/letsencrypt/live/grader.example.edu/privkey.pem", str(key))
        .replace("127.0.0.1:8000", f"127.0.0.1:{app_port}")
    )
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\naccess_log {tmp_path}/access.log;\nclient_body_temp_path {tmp_path};\n"
        f"proxy_temp_path {tmp_path};\n{block}\n}}\n"
    )
    settings = make_settings(tmp_path, public_url="https://grader.example.edu")
    state = open_state(ROOT, f"sqlite:///{tmp_path / 'serve.db'}", settings.state, settings=settings)
    (link,) = invite(state, [RosterEntry("alice")], "https://grader.example.edu")
    proxy = subprocess.Popen([nginx, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-g", "daemon off;"])
    try:
        with run_server(create_app(ROOT, state=state), port=app_port):
            context = ssl.create_default_context(cafile=str(cert))
            client = httpx.Client(
                base_url=f"https://127.0.0.1:{tls_port}", verify=context, headers={"Host": "grader.example.edu"}
            )
            deadline = time.monotonic() + 20
            while True:
                try:
                    page = client.get(
                        link.url.replace("https://grader.example.edu", ""),
                        extensions={"sni_hostname": "grader.example.edu"},
                    )
                    break
                except httpx.ConnectError:
                    assert time.monotonic() < deadline and proxy.poll() is None, (tmp_path / "error.log").read_text()
                    time.sleep(0.1)
            assert page.status_code == 200 and "Sign in" in page.text
            signed = client.post(
                link.url.replace("https://grader.example.edu", ""),
                data={"csrf": csrf(page.text)},
                extensions={"sni_hostname": "grader.example.edu"},
            )
            cookie = signed.headers["set-cookie"].lower()
            assert signed.status_code == 303 and "secure" in cookie and "httponly" in cookie
            redirect = httpx.get(f"http://127.0.0.1:{plain_port}/", headers={"Host": "grader.example.edu"})
            assert redirect.status_code == 301 and redirect.headers["location"] == "https://grader.example.edu/"
    finally:
        proxy.terminate()
        proxy.wait(10)
    with state.db() as db:
        assert [a.actor for a in db.execute(select(Audit).where(Audit.action == "login by link")).scalars()] == [
            "alice"
        ]
    state.engine.dispose()
