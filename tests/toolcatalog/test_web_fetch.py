"""``web_fetch`` through the real tool (``run_tool``) against a real local HTTP server:
readable markdown, PDFs, text, truncation with the full text kept, redirects, and the
size/time/redirect limits."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from pathlib import Path

import pytest

from tests.support.web_servers import SiteServer
from toolcatalog import web_guard



@pytest.fixture
def site(settings):
    with SiteServer() as server:
        settings.NETA_WEB_FETCH_ALLOW = [f"127.0.0.1:{server.port}"]
        settings.NETA_WEB_FETCH_DENY = []
        yield server


def fetch(call, url, **args):
    return call("web_fetch", url=url, **args)


def test_an_article_page_becomes_readable_markdown_without_the_page_furniture(call, site):
    result = fetch(call, site.url("/article"))
    assert not result.is_error, result.text_output()
    text = result.text_output()
    assert text.startswith(f"URL: {site.url('/article')}\n\n# Tree sessions explained\n")
    assert "## Why branches matter" in text
    assert "**branch summary**" in text
    assert "[the Pi format](https://example.org/pi)" in text
    assert "- Entries are immutable once completed." in text
    assert "| file | JSONL |" in text
    for noise in ("NAV-NOISE", "AD-NOISE", "FOOTER-NOISE", "SCRIPT-NOISE", "color:red"):
        assert noise not in text, noise
    details = result.details
    assert details["title"] == "Tree sessions explained" and details["kind"] == "html" and details["extractor"] == "trafilatura"
    assert details["status"] == 200 and details["contentType"] == "text/html" and details["address"] == "127.0.0.1"
    assert "truncation" not in details and "fullOutputPath" not in details


def test_a_gzip_page_is_decoded(call, site):
    result = fetch(call, site.url("/article.gz"))
    assert not result.is_error and "## Why branches matter" in result.text_output()
    assert site.hits[-1].headers["accept-encoding"] == "gzip, deflate"


def test_a_page_s_own_meta_charset_is_honoured(call, site):
    result = fetch(call, site.url("/latin1.html"))
    assert not result.is_error, result.text_output()
    assert "Crème brûlée au café, servie tiède." in result.text_output()


def test_raw_returns_the_body_itself(call, site):
    result = fetch(call, site.url("/article"), raw=True)
    assert not result.is_error
    assert "<nav><ul>" in result.text_output() and "NAV-NOISE" in result.text_output()
    assert result.details["extractor"] == "raw"


def test_a_pdf_is_read_page_by_page(call, site):
    result = fetch(call, site.url("/doc.pdf"))
    assert not result.is_error, result.text_output()
    text = result.text_output()
    assert "# Neta test PDF" in text
    assert "<!-- page 1 -->\nFirst page: the PDF says hello." in text
    assert "<!-- page 2 -->\nSecond page: goodbye from the PDF." in text
    assert result.details["kind"] == "pdf" and result.details["pages"] == 2 and result.details["extractor"] == "pypdf"


def test_plain_text_json_and_a_declared_charset(call, site):
    plain = fetch(call, site.url("/notes.txt"))
    assert plain.text_output() == f"URL: {site.url('/notes.txt')}\n\nline one of the plain text\nline two: naïve café\n"
    latin = fetch(call, site.url("/latin1.txt"))
    assert "café au lait" in latin.text_output()
    data = fetch(call, site.url("/data.json"))
    assert '{\n  "b": [\n    1,\n    2\n  ],\n  "a": "x"\n}' in data.text_output()


def test_an_image_is_refused_with_its_type(call, site):
    result = fetch(call, site.url("/image.png"))
    assert result.is_error and "image/png, which web_fetch does not read" in result.text_output()


def test_an_http_error_is_an_error_result_with_the_status(call, site):
    result = fetch(call, site.url("/status/404"))
    assert result.is_error
    assert result.text_output().startswith(f"{site.url('/status/404')} answered HTTP 404 Not Found")
    assert result.details["status"] == 404


def test_long_text_is_truncated_like_read_and_the_full_text_is_kept(call, site):
    result = fetch(call, site.url("/long.txt?lines=5000"))
    assert not result.is_error
    text = result.text_output()
    details = result.details
    kept = Path(details["fullOutputPath"])
    assert kept.read_text().endswith("line 4999\nline 5000\n")
    assert kept.read_text().count("\n") == 5000 + 2
    assert "line 1997\n" in text and "line 1999\n" not in text
    assert text.endswith(f"[Showing 2000 of 5003 lines. Full text: {kept}]")
    assert details["truncation"]["truncated"] is True and details["truncation"]["truncatedBy"] == "lines"


def test_max_chars_cuts_earlier_and_keeps_the_full_text(call, site):
    result = fetch(call, site.url("/article"), max_chars=300)
    text = result.text_output()
    kept = Path(result.details["fullOutputPath"])
    body, notice = text.rsplit("\n\n[", 1)
    assert len(body) <= 300
    assert notice.startswith(f"Showing the first {len(body)} of {result.details['chars']} characters (max_chars). Full text: {kept}")
    assert "FOOTER-NOISE" not in kept.read_text() and "Compaction replaces old turns" in kept.read_text()


def test_redirects_are_followed_and_reported(call, site):
    result = fetch(call, site.url("/chain/3"))
    assert not result.is_error and "end of the chain" in result.text_output()
    assert result.details["redirects"] == [site.url("/chain/2"), site.url("/chain/1"), site.url("/chain/0")]
    assert result.details["finalUrl"] == site.url("/chain/0")


def test_too_many_redirects_stop(call, site, settings):
    settings.NETA_WEB_FETCH_MAX_REDIRECTS = 2
    result = fetch(call, site.url("/chain/3"))
    assert result.is_error and "more than 2 redirects" in result.text_output()
    assert [h.path for h in site.hits] == ["/chain/3", "/chain/2", "/chain/1"]


def test_a_body_bigger_than_the_limit_stops_while_streaming(call, site, settings):
    settings.NETA_WEB_FETCH_MAX_BYTES = 1024 * 1024
    result = fetch(call, site.url("/huge"))
    assert result.is_error and "larger than 1048576 bytes" in result.text_output()


def test_a_declared_huge_body_is_refused_before_reading(call, site):
    result = fetch(call, site.url("/huge-declared"))
    assert result.is_error and "the response is 524288000 bytes; the limit is 10485760" in result.text_output()


def test_a_compression_bomb_stops_at_the_limit(call, site):
    result = fetch(call, site.url("/bomb"))
    assert result.is_error and "decompressed response is larger than 10485760 bytes" in result.text_output()


def test_a_trickling_body_hits_the_deadline(call, site, settings):
    settings.NETA_WEB_FETCH_TIMEOUT = 1
    result = fetch(call, site.url("/slow"))
    assert result.is_error and "timed out after 1 s (reading the body)" in result.text_output()


def test_a_server_that_never_answers_hits_the_deadline(call, site, settings):
    settings.NETA_WEB_FETCH_TIMEOUT = 1
    result = fetch(call, site.url("/stall?s=5"))
    assert result.is_error and "timed out after 1 s" in result.text_output()


def test_cancellation_stops_a_slow_download(call, ctx, site):
    ctx.cancel = threading.Event()
    timer = threading.Timer(0.5, ctx.cancel.set)
    timer.start()
    try:
        result = fetch(call, site.url("/slow"), _ctx=ctx)
    finally:
        timer.cancel()
    assert result.is_error and "cancelled" in result.text_output().lower()


def test_the_user_agent_names_neta_and_host_is_the_url_s(call, site):
    result = fetch(call, site.url("/echo-host"))
    assert f"host header: 127.0.0.1:{site.port}" in result.text_output()
    assert site.hits[-1].headers["user-agent"].startswith("Neta-WebFetch/")


def test_a_name_on_the_allow_list_connects_to_the_address_it_was_checked_at(call, settings):
    """``localhost`` resolved once, checked, and the connection made to that address with the
    name kept in ``Host`` (the server only listens on 127.0.0.1)."""
    with SiteServer() as server:
        settings.NETA_WEB_FETCH_ALLOW = [f"localhost:{server.port}"]
        result = call("web_fetch", url=f"http://localhost:{server.port}/echo-host")
        assert not result.is_error, result.text_output()
        assert f"host header: localhost:{server.port}" in result.text_output()
        assert result.details["address"] == "127.0.0.1"


def _exchange(target, context=None):
    return web_guard._exchange(
        target, method="GET", headers=None, body=None, deadline=time.monotonic() + 10,
        limits=web_guard.WebLimits(), context=context, cancel=None,
    )


def _target(host: str, port: int, scheme: str = "http", path: str = "/echo-host") -> web_guard.Target:
    return web_guard.Target(
        url=f"{scheme}://{host}:{port}{path}", scheme=scheme, host=host, port=port, path=path,
        address="127.0.0.1", addresses=("127.0.0.1",), allowed_by_list=True,
    )


def test_the_connection_goes_to_the_checked_address_and_never_looks_the_name_up_again():
    """Pinning (DNS rebinding closed): the request connects to the address the guard checked,
    even for a name that resolves to nothing at all now — no second lookup can move it."""
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("neta-pin-test.invalid", 80)  # the name really does not resolve
    with SiteServer() as server:
        response = _exchange(_target("neta-pin-test.invalid", server.port))
        assert response.status == 200 and response.address == "127.0.0.1"
        assert f"host header: neta-pin-test.invalid:{server.port}" in response.body.decode()
        assert len(server.hits) == 1


def _self_signed(tmp_path: Path, name: str) -> tuple[Path, Path]:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_path, key_path


def test_tls_to_the_pinned_address_sends_the_name_as_sni_and_verifies_the_certificate_against_it(tmp_path):
    cert, key = _self_signed(tmp_path, "neta-tls.invalid")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    seen_sni: list[str] = []
    server_ctx.sni_callback = lambda sock, name, ctx: seen_sni.append(name)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    with SiteServer() as server:
        server._server.socket = server_ctx.wrap_socket(server._server.socket, server_side=True)
        response = _exchange(_target("neta-tls.invalid", server.port, scheme="https"), context=client_ctx)
        assert response.status == 200 and "host header: neta-tls.invalid" in response.body.decode()
        assert seen_sni == ["neta-tls.invalid"]
        # The same address under another name: the certificate does not match it, refused.
        with pytest.raises(web_guard.WebFetchError, match="CERTIFICATE_VERIFY_FAILED|doesn't match|hostname mismatch"):
            _exchange(_target("other-name.invalid", server.port, scheme="https"), context=client_ctx)
        assert seen_sni == ["neta-tls.invalid", "other-name.invalid"]


def test_a_non_ascii_path_is_sent_percent_encoded(call, site):
    result = fetch(call, site.url("/café?q=ü"))
    assert result.is_error and "answered HTTP 404" in result.text_output()
    assert site.hits[-1].path == "/caf%C3%A9?q=%C3%BC"


def test_a_name_lookup_counts_against_the_deadline():
    """No time left: no lookup; an answered lookup passes through, a failed one says so. (A
    lookup that hangs is abandoned at the deadline; no real resolver here hangs on demand.)"""
    with pytest.raises(web_guard.WebFetchError, match="timed out after 0 s resolving 'localhost'"):
        web_guard.resolve_within(0)("localhost", 80)
    assert "127.0.0.1" in web_guard.resolve_within(10)("localhost", 80)
    with pytest.raises(web_guard.WebFetchError, match="cannot resolve host"):
        web_guard.resolve_within(10)("neta-pin-test.invalid", 80)
