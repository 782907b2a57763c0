"""The SSRF corpus: hostile URLs through the real ``web_fetch`` tool, and the canary servers
count what reaches them — nothing may.

Two canaries listen on loopback (127.0.0.1 and, when the host has IPv6, ::1) on ports the OS
picks; no allow list names them. Every direct case spells a blocked address some other way
(decimal, octal, hex, short forms, IPv6 wrappers, private/metadata ranges, userinfo and
parser tricks, other schemes). The redirect cases start at a third server that *is* allowed
(``127.0.0.1:<port>`` in ``NETA_WEB_FETCH_ALLOW``) and redirects to blocked places; it must
see exactly the first request of each case and the canaries none. Allowed spellings are
exact: the allowed server under another spelling of its address is refused too.
"""

from __future__ import annotations

import socket
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import quote

import pytest

from tests.support.web_servers import SiteServer, _SiteHandler
from toolcatalog import web_guard



class _V6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True


class V6Canary:
    def __init__(self) -> None:
        self.hits: list = []
        self.lock = threading.Lock()
        self._server = _V6Server(("::1", 0), _SiteHandler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def servers():
    canary = SiteServer().__enter__()
    allowed = SiteServer().__enter__()
    try:
        v6 = V6Canary()
    except OSError:
        v6 = None
    yield canary, allowed, v6
    canary.__exit__(None, None, None)
    allowed.__exit__(None, None, None)
    if v6 is not None:
        v6.close()


def direct_cases(p: int, p6: int) -> list[str]:
    """Every one targets a canary (port ``p`` on 127.0.0.1, ``p6`` on ::1) or a blocked range."""
    return [
        f"http://127.0.0.1:{p}/",
        f"http://127.1:{p}/",
        f"http://127.0.1:{p}/",
        f"http://0x7f.1:{p}/",
        f"http://0x7f000001:{p}/",
        f"http://0x7F.0x0.0x0.0x1:{p}/",
        f"http://2130706433:{p}/",
        f"http://017700000001:{p}/",
        f"http://0177.0.0.1:{p}/",
        f"http://0177.0000.0000.0001:{p}/",
        f"http://127.000.000.001:{p}/",
        f"http://127.255.255.254:{p}/",
        f"http://localhost:{p}/",
        f"http://LOCALHOST:{p}/",
        f"http://localhost.:{p}/",
        f"http://0.0.0.0:{p}/",
        f"http://0:{p}/",
        f"http://[::1]:{p6}/",
        f"http://[0:0:0:0:0:0:0:1]:{p6}/",
        f"http://[::]:{p6}/",
        f"http://[::ffff:127.0.0.1]:{p}/",
        f"http://[::ffff:7f00:1]:{p}/",
        f"http://[0:0:0:0:0:ffff:127.0.0.1]:{p}/",
        f"http://[::127.0.0.1]:{p}/",
        f"http://[64:ff9b::127.0.0.1]:{p}/",
        f"http://[2002:7f00:1::]:{p}/",
        f"http://[fe80::1]:{p}/",
        f"http://[fc00::1]:{p}/",
        f"http://[fd00:ec2::254]/latest/meta-data/",
        f"http://[ff02::1]:{p}/",
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://169.254.170.2/v2/credentials",
        f"http://10.0.0.1:{p}/",
        f"http://172.16.0.1:{p}/",
        f"http://192.168.1.1:{p}/",
        f"http://100.64.0.1:{p}/",
        f"http://198.18.0.1:{p}/",
        f"http://224.0.0.1:{p}/",
        f"http://255.255.255.255:{p}/",
        f"http://240.0.0.1:{p}/",
        f"http://evil@127.0.0.1:{p}/",
        f"http://user:pass@127.0.0.1:{p}/",
        f"http://example.com@127.0.0.1:{p}/",
        f"http://127.0.0.1:{p}@example.com/",
        f"http://127.0.0.1:{p}\\@example.com/",
        f"http://127.0.0.1:{p}#@example.com/",
        f"http://127.0.0.1:{p}?@example.com/",
        f"HTTP://127.0.0.1:{p}/",
        f" http://127.0.0.1:{p}/",
        f"http://127.0.0.1:{p}/%2e%2e/%2e%2e/etc/passwd",
        f"http:///127.0.0.1:{p}/",
        f"http:127.0.0.1:{p}/",
        "file:///etc/passwd",
        f"file://127.0.0.1:{p}/etc/passwd",
        f"gopher://127.0.0.1:{p}/_GET%20/%20HTTP/1.0",
        f"ftp://127.0.0.1:{p}/",
        f"dict://127.0.0.1:{p}/info",
        f"ldap://127.0.0.1:{p}/",
        "data:text/plain,hello",
        "javascript:alert(1)",
        f"//127.0.0.1:{p}/",
        f"http://[::1%25lo]:{p6}/",
        f"http://127.0.0.1:0/",
    ]


def redirect_cases(p: int, p6: int, q: int) -> list[str]:
    """Targets the allowed server (port ``q``) redirects to."""
    return [
        f"http://127.0.0.1:{p}/",
        f"http://localhost:{p}/",
        f"http://127.1:{p}/",
        f"http://0x7f.1:{q}/",  # the allowed server itself, under another spelling
        f"http://localhost:{q}/",
        f"http://[::1]:{p6}/",
        f"http://[::ffff:127.0.0.1]:{q}/",
        "http://169.254.169.254/latest/meta-data/",
        f"file:///etc/passwd",
        f"gopher://127.0.0.1:{p}/",
        f"//127.1:{p}/",
        f"http://evil@127.0.0.1:{q}/",
        f"http://10.0.0.1:{p}/",
    ]


def test_the_corpus_is_big_enough(servers):
    canary, allowed, v6 = servers
    p6 = v6.port if v6 else canary.port
    assert len(direct_cases(canary.port, p6)) + 3 * len(redirect_cases(canary.port, p6, allowed.port)) >= 40


def test_no_hostile_url_reaches_a_blocked_address(call, servers, settings):
    canary, allowed, v6 = servers
    p6 = v6.port if v6 else canary.port
    settings.NETA_WEB_FETCH_ALLOW = [f"127.0.0.1:{allowed.port}"]
    settings.NETA_WEB_FETCH_DENY = []
    outcomes = {}
    for url in direct_cases(canary.port, p6):
        result = call("web_fetch", url=url)
        outcomes[url] = result.text_output()
        assert result.is_error, f"{url!r} was fetched: {result.text_output()[:200]}"
    assert canary.hits == [], [h.path for h in canary.hits]
    assert v6 is None or v6.hits == []
    assert allowed.hits == []
    refused = [u for u, text in outcomes.items() if text.startswith("Refused to fetch")]
    # Everything is refused by the guard, except what cannot even be turned into a request
    # (names that do not resolve: the blocked address is then never known, nothing is sent).
    not_refused = {u: t for u, t in outcomes.items() if u not in refused}
    assert all("cannot resolve host" in t for t in not_refused.values()), not_refused
    assert len(refused) >= 55


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_redirects_to_blocked_places_are_refused_at_the_hop(call, servers, settings, code):
    canary, allowed, v6 = servers
    p6 = v6.port if v6 else canary.port
    settings.NETA_WEB_FETCH_ALLOW = [f"127.0.0.1:{allowed.port}"]
    settings.NETA_WEB_FETCH_DENY = []
    allowed.reset()
    cases = redirect_cases(canary.port, p6, allowed.port)
    for target in cases:
        url = allowed.url(f"/redirect?code={code}&to={quote(target, safe='')}")
        result = call("web_fetch", url=url)
        assert result.is_error, f"redirect to {target!r} was followed: {result.text_output()[:200]}"
        assert result.text_output().startswith(f"Refused to fetch {url}:"), result.text_output()
    assert canary.hits == [] and (v6 is None or v6.hits == [])
    assert len(allowed.hits) == len(cases)  # each case's first request, never a hop back to it


def test_the_deny_list_wins_over_the_allow_list(call, servers, settings):
    canary, allowed, _ = servers
    allowed.reset()
    for deny in ([f"127.0.0.1:{allowed.port}"], ["127.0.0.1"], ["127.0.0.0/8"]):
        settings.NETA_WEB_FETCH_ALLOW = [f"127.0.0.1:{allowed.port}"]
        settings.NETA_WEB_FETCH_DENY = deny
        result = call("web_fetch", url=allowed.url("/notes.txt"))
        assert result.is_error and "deny" in result.text_output(), (deny, result.text_output())
    assert allowed.hits == []


def test_an_allow_entry_without_a_port_allows_every_port_of_that_host(call, servers, settings):
    canary, allowed, _ = servers
    settings.NETA_WEB_FETCH_ALLOW = ["127.0.0.1"]
    settings.NETA_WEB_FETCH_DENY = []
    canary.reset()
    assert not call("web_fetch", url=canary.url("/notes.txt")).is_error
    assert len(canary.hits) == 1
    canary.reset()


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("172.31.255.255", "a private address"),
        ("192.168.0.1", "a private address"),
        ("100.100.100.100", "a shared (CGNAT) address"),
        ("169.254.169.254", "the cloud metadata address"),
        ("169.254.1.1", "a link-local address"),
        ("0.0.0.0", "an unspecified/'this network' address"),
        ("224.0.0.251", "a multicast address"),
        ("255.255.255.255", "a reserved address"),
        ("192.0.2.1", "a documentation address"),
        ("::1", "a loopback address"),
        ("::", "the unspecified address"),
        ("fd00:ec2::254", "the cloud metadata address"),
        ("fd12:3456::1", "a unique-local (private) address"),
        ("fe80::1", "a link-local address"),
        ("ff02::1", "a multicast address"),
        ("::ffff:10.0.0.1", "a private address (10.0.0.1) inside an IPv6 address"),
        ("::ffff:169.254.169.254", "the cloud metadata address (169.254.169.254) inside an IPv6 address"),
        ("64:ff9b::a00:1", "a private address (10.0.0.1) inside an IPv6 address"),
        ("2002:c0a8:101::", "a private address (192.168.1.1) inside an IPv6 address"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "inside an IPv6 address"),  # Teredo: client 192.0.2.45
        ("2001:db8::1", "a documentation address"),
        ("8.8.8.8", ""),
        ("1.1.1.1", ""),
        ("2606:4700:4700::1111", ""),
        ("::ffff:8.8.8.8", ""),
    ],
)
def test_address_classification(address, reason):
    got = web_guard.blocked_reason(address)
    assert (reason in got) if reason else got == "", got


@pytest.mark.parametrize(
    "entry",
    ["", "[::1", "host:99999", "host:port", "*.", "10.0.0.0/33"],
)
def test_bad_list_entries_are_named(entry):
    with pytest.raises(ValueError):
        web_guard.parse_rules([entry], allow_ranges=True, setting="NETA_WEB_FETCH_DENY")


def test_a_misconfigured_list_makes_web_fetch_say_so(call, settings):
    settings.NETA_WEB_FETCH_ALLOW = ["host:notaport"]
    result = call("web_fetch", url="http://8.8.8.8/")
    assert result.is_error and "web_fetch is misconfigured on this server: NETA_WEB_FETCH_ALLOW" in result.text_output()


def test_an_allowed_ipv6_literal_is_reached_over_ipv6(call, servers, settings):
    _canary, _allowed, v6 = servers
    if v6 is None:
        pytest.skip("no IPv6 loopback on this host")
    settings.NETA_WEB_FETCH_ALLOW = [f"[::1]:{v6.port}"]
    settings.NETA_WEB_FETCH_DENY = []
    before = len(v6.hits)
    result = call("web_fetch", url=f"http://[::1]:{v6.port}/echo-host")
    assert not result.is_error, result.text_output()
    assert f"host header: [::1]:{v6.port}" in result.text_output() and result.details["address"] == "::1"
    assert len(v6.hits) == before + 1
    v6.hits.clear()
