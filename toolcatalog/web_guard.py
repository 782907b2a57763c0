"""The SSRF and abuse guard of the web tools: every request ``web_fetch`` and ``web_search`` make.

A request goes out only if:

* its scheme is ``http`` or ``https`` and its URL carries no user name or password;
* its host is not on the deny list (``NETA_WEB_FETCH_DENY``: hosts, ``host:port``,
  ``*.domain`` suffixes, or address ranges in CIDR form, checked against every
  resolved address too);
* **every** address the host resolves to is public — not loopback, private
  (RFC 1918, unique-local ``fc00::/7``), link-local (the cloud metadata
  addresses ``169.254.169.254`` and ``fd00:ec2::254`` fall in these), multicast,
  reserved, unspecified, shared/CGNAT ``100.64.0.0/10``, benchmarking, documentation,
  and IPv6 forms that carry an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``,
  IPv4-compatible ``::a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo) are
  judged by the IPv4 address inside — unless the host as written in the URL (or
  ``host:port``) is on the allow list ``NETA_WEB_FETCH_ALLOW``, the only way to reach
  such an address (an intranet wiki; the tests' 127.0.0.1).

The host is resolved once (``getaddrinfo``, which also reads ``127.1``, ``0x7f.1``,
``2130706433`` as the kernel would) and the connection is made **to the checked
address**, with the original name in ``Host`` and as TLS SNI (certificates are verified
against the name): a DNS answer that changes between the check and the connection
(rebinding) cannot move it. Each redirect is a new request through the same checks.
Limits: ``NETA_WEB_FETCH_MAX_BYTES`` of body (compressed and decompressed), one deadline
of ``NETA_WEB_FETCH_TIMEOUT`` seconds for the whole exchange (every read is bounded by
what is left of it), ``NETA_WEB_FETCH_MAX_REDIRECTS`` redirects. Proxy variables
(``HTTP_PROXY``…) are not used. The user agent names Neta. The name lookup counts against the
deadline too.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

from django.conf import settings

USER_AGENT = "Neta-WebFetch/1.0 (+https://github.com/neta; an AI agent's web tool)"
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_REDIRECTS = 5
READ_CHUNK = 64 * 1024
MAX_URL_LENGTH = 8192

_IP = ipaddress.ip_address
_NET = ipaddress.ip_network

# Checked in this order; the first match names the reason. Python's ``is_global`` is the
# backstop for whatever IANA marks as not globally reachable and is not listed here.
_BLOCKED_V4: tuple[tuple[ipaddress.IPv4Network, str], ...] = tuple(
    (_NET(net), why)
    for net, why in (
        ("0.0.0.0/8", "an unspecified/'this network' address"),
        ("127.0.0.0/8", "a loopback address"),
        ("10.0.0.0/8", "a private address"),
        ("172.16.0.0/12", "a private address"),
        ("192.168.0.0/16", "a private address"),
        ("100.64.0.0/10", "a shared (CGNAT) address"),
        ("169.254.169.254/32", "the cloud metadata address"),
        ("169.254.0.0/16", "a link-local address"),
        ("192.0.0.0/24", "an IETF protocol assignment"),
        ("192.0.2.0/24", "a documentation address"),
        ("198.51.100.0/24", "a documentation address"),
        ("203.0.113.0/24", "a documentation address"),
        ("198.18.0.0/15", "a benchmarking address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),
    )
)
_BLOCKED_V6: tuple[tuple[ipaddress.IPv6Network, str], ...] = tuple(
    (_NET(net), why)
    for net, why in (
        ("::/128", "the unspecified address"),
        ("::1/128", "a loopback address"),
        ("fd00:ec2::254/128", "the cloud metadata address"),
        ("fc00::/7", "a unique-local (private) address"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a site-local address"),
        ("ff00::/8", "a multicast address"),
        ("100::/64", "a discard-only address"),
        ("2001:db8::/32", "a documentation address"),
        ("::/8", "a reserved address"),
    )
)
_NAT64 = _NET("64:ff9b::/96")
_NAT64_LOCAL = _NET("64:ff9b:1::/48")


class WebRefused(Exception):
    """The guard refuses a request (scheme, host, address, deny list, redirect target)."""


class WebFetchError(Exception):
    """The request was allowed but failed (connection, TLS, timeout, size, protocol)."""


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries, if any (mapped, compatible, NAT64, 6to4, Teredo)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if int(ip) >> 32 == 0 and int(ip) > 1:  # ::a.b.c.d, the deprecated IPv4-compatible form
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def blocked_reason(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """Why ``address`` may not be reached ("" when it is a public address): "a loopback address"…"""
    ip = _IP(address.split("%", 1)[0]) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address):
        inner = embedded_ipv4(ip)
        if inner is not None:
            why = blocked_reason(inner)
            if why:
                return f"{why} ({inner}) inside an IPv6 address"
            if ip.ipv4_mapped is None and ip in _NET("::/96"):
                return "a deprecated IPv4-compatible IPv6 address"
            return ""
        if ip in _NAT64_LOCAL:
            return "a local-use NAT64 address"
        for net, why in _BLOCKED_V6:
            if ip in net:
                return why
    else:
        for net, why in _BLOCKED_V4:
            if ip in net:
                return why
    if not ip.is_global:
        return "not a globally reachable address"
    return ""


# --------------------------------------------------------------------------- policy


@dataclass(frozen=True, slots=True)
class HostRule:
    """One allow/deny entry: a host (optionally with a port), a ``*.domain`` suffix, or a CIDR range."""

    host: str = ""
    port: int | None = None
    suffix: str = ""
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None

    @classmethod
    def parse(cls, text: str, *, allow_ranges: bool) -> HostRule:
        raw = text.strip().lower()
        if not raw:
            raise ValueError("empty entry")
        if allow_ranges and "/" in raw:
            try:
                return cls(network=_NET(raw, strict=False))
            except ValueError:
                raise ValueError(f"{text!r} is not an address range") from None
        if raw.startswith("*.") or raw.startswith("."):
            suffix = raw.lstrip("*").lstrip(".")
            if not suffix:
                raise ValueError(f"{text!r} names no domain")
            return cls(suffix=normalize_host(suffix))
        host, port = raw, None
        if raw.startswith("["):
            end = raw.find("]")
            if end < 0:
                raise ValueError(f"{text!r}: unclosed '['")
            host, rest = raw[1:end], raw[end + 1 :]
            if rest:
                if not rest.startswith(":"):
                    raise ValueError(f"{text!r}: expected ':port' after ']'")
                port = _port(rest[1:], text)
        elif raw.count(":") == 1:
            host, port_text = raw.split(":")
            port = _port(port_text, text)
        return cls(host=normalize_host(host), port=port)

    def matches(self, host: str, port: int, addresses: Iterable[str] = ()) -> bool:
        if self.network is not None:
            return any(_IP(a.split("%", 1)[0]) in self.network for a in addresses) or _host_in(host, self.network)
        if self.suffix:
            return host == self.suffix or host.endswith("." + self.suffix)
        return host == self.host and (self.port is None or self.port == port)


def _host_in(host: str, network) -> bool:
    try:
        return _IP(host) in network
    except ValueError:
        return False


def _same_address(host: str, address: str) -> bool:
    try:
        return _IP(host) == _IP(address.split("%", 1)[0])
    except ValueError:
        return False


def _port(text: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{entry!r}: {text!r} is not a port")
    return int(text)


def normalize_host(host: str) -> str:
    """Lower case, no trailing dot, no IPv6 brackets, IDNA (punycode) for names."""
    host = host.strip().strip("[]").rstrip(".").lower()
    if not host:
        return host
    if ":" in host:
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def parse_rules(entries: Iterable[str], *, allow_ranges: bool, setting: str) -> tuple[HostRule, ...]:
    rules, errors = [], []
    for entry in entries:
        try:
            rules.append(HostRule.parse(entry, allow_ranges=allow_ranges))
        except ValueError as exc:
            errors.append(str(exc))
    if errors:
        raise ValueError(f"{setting}: " + "; ".join(errors))
    return tuple(rules)


@dataclass(frozen=True)
class WebLimits:
    max_bytes: int = DEFAULT_MAX_BYTES
    timeout: float = DEFAULT_TIMEOUT
    max_redirects: int = DEFAULT_MAX_REDIRECTS


@dataclass(frozen=True)
class WebPolicy:
    """Allow and deny lists plus limits (from settings: :func:`policy_from_settings`)."""

    allow: tuple[HostRule, ...] = ()
    deny: tuple[HostRule, ...] = ()
    limits: WebLimits = field(default_factory=WebLimits)

    def with_allowed(self, host: str, port: int) -> WebPolicy:
        return WebPolicy(allow=self.allow + (HostRule(host=normalize_host(host), port=port),), deny=self.deny, limits=self.limits)


def _setting(name: str, default: Any) -> Any:
    try:
        return getattr(settings, name, default) if settings.configured else default
    except ImportError:  # pragma: no cover - django is a dependency
        return default


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [v for v in (p.strip() for p in value.split(",")) if v]
    return [str(v) for v in value or ()]


def policy_from_settings() -> WebPolicy:
    """``NETA_WEB_FETCH_ALLOW`` / ``_DENY`` / ``_MAX_BYTES`` / ``_TIMEOUT`` / ``_MAX_REDIRECTS``."""
    return WebPolicy(
        allow=parse_rules(_as_list(_setting("NETA_WEB_FETCH_ALLOW", [])), allow_ranges=False, setting="NETA_WEB_FETCH_ALLOW"),
        deny=parse_rules(_as_list(_setting("NETA_WEB_FETCH_DENY", [])), allow_ranges=True, setting="NETA_WEB_FETCH_DENY"),
        limits=WebLimits(
            max_bytes=int(_setting("NETA_WEB_FETCH_MAX_BYTES", DEFAULT_MAX_BYTES)),
            timeout=float(_setting("NETA_WEB_FETCH_TIMEOUT", DEFAULT_TIMEOUT)),
            max_redirects=int(_setting("NETA_WEB_FETCH_MAX_REDIRECTS", DEFAULT_MAX_REDIRECTS)),
        ),
    )


# --------------------------------------------------------------------------- checking a URL


@dataclass(frozen=True, slots=True)
class Target:
    """A URL the guard accepted: where to connect (``address``) and what to call the host."""

    url: str
    scheme: str
    host: str  # normalized, as written in the URL
    port: int
    path: str  # path + query, as sent in the request line
    address: str  # the checked address the connection goes to
    addresses: tuple[str, ...]  # everything the host resolved to
    allowed_by_list: bool


Resolver = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (IPv4 and IPv6, deduplicated, resolver order)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise WebFetchError(f"cannot resolve host {host!r}: {exc}") from None
    out: list[str] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        if sockaddr[0] not in out:
            out.append(sockaddr[0])
    if not out:
        raise WebFetchError(f"host {host!r} has no address")
    return out


def resolve_within(seconds: float) -> Resolver:
    """:func:`resolve` bounded by ``seconds`` (a lookup that hangs is abandoned to its thread)."""

    def bounded(host: str, port: int) -> list[str]:
        if seconds <= 0:
            raise WebFetchError(f"timed out after {seconds:g} s resolving {host!r}")
        answer: list = []
        done = threading.Event()

        def lookup() -> None:
            try:
                answer.append(resolve(host, port))
            except WebFetchError as exc:
                answer.append(exc)
            finally:
                done.set()

        threading.Thread(target=lookup, name="web-guard-resolve", daemon=True).start()
        if not done.wait(seconds):
            raise WebFetchError(f"timed out after {seconds:g} s resolving {host!r}")
        if isinstance(answer[0], WebFetchError):
            raise answer[0]
        return answer[0]

    return bounded


def check_url(url: str, policy: WebPolicy, *, resolver: Resolver = resolve) -> Target:
    """Check ``url`` against the guard and resolve it; :class:`WebRefused` names why not."""
    if not isinstance(url, str) or not url.strip():
        raise WebRefused("the URL is empty")
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        raise WebRefused(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise WebRefused("the URL contains spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise WebRefused(f"the URL cannot be parsed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise WebRefused(f"only http and https URLs can be fetched, not {scheme + ':' if scheme else 'a URL without a scheme'}")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise WebRefused("URLs with a user name or password (user@host) are refused")
    if "\\" in parts.netloc:
        raise WebRefused("the URL's host contains a backslash")
    raw_host = parts.hostname or ""
    if not raw_host:
        raise WebRefused("the URL has no host")
    host = normalize_host(raw_host)
    if "%" in host:
        raise WebRefused("IPv6 zone identifiers are refused")
    port = port if port is not None else (443 if scheme == "https" else 80)
    if port == 0:
        raise WebRefused("port 0 is refused")
    for rule in policy.deny:
        if rule.network is None and rule.matches(host, port):
            raise WebRefused(f"{host}:{port} is on the deny list (NETA_WEB_FETCH_DENY)")
    allowed = any(rule.matches(host, port) for rule in policy.allow)
    addresses = resolver(host, port)
    for rule in policy.deny:
        if rule.network is not None and rule.matches(host, port, addresses):
            raise WebRefused(f"{host} resolves into {rule.network}, a range on the deny list (NETA_WEB_FETCH_DENY)")
    if not allowed:
        for address in addresses:
            why = blocked_reason(address)
            if why:
                where = f"{host} is" if _same_address(host, address) else f"{host} resolves to {address},"
                raise WebRefused(
                    f"{where} {why}; such addresses are reached only when an operator lists the host "
                    "in NETA_WEB_FETCH_ALLOW"
                )
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    path = quote(path, safe="!#$%&'()*+,/:;=?@[]~")  # non-ASCII as UTF-8 escapes; existing escapes kept
    return Target(
        url=url,
        scheme=scheme,
        host=host,
        port=port,
        path=path,
        address=addresses[0],
        addresses=tuple(addresses),
        allowed_by_list=allowed,
    )


# --------------------------------------------------------------------------- connecting


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the checked address, whatever the name resolves to now."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """TLS to the checked address; SNI and certificate checks use the URL's host name."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


@dataclass
class WebResponse:
    url: str  # the final URL (after redirects)
    status: int
    reason: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    address: str  # the address the final request connected to
    redirects: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    @property
    def charset(self) -> str | None:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                return value.strip().strip('"').lower()
        return None


_REDIRECTS = (301, 302, 303, 307, 308)
_ssl_context: ssl.SSLContext | None = None


def default_ssl_context() -> ssl.SSLContext:
    """The system's trust store, loaded once per process (~0.1 s to build)."""
    global _ssl_context
    if _ssl_context is None:
        _ssl_context = ssl.create_default_context()
    return _ssl_context


def request(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    policy: WebPolicy | None = None,
    follow_redirects: bool = True,
    ssl_context: ssl.SSLContext | None = None,
    cancel: Any = None,
) -> WebResponse:
    """One guarded HTTP exchange, redirects followed (each hop checked again).

    Raises :class:`WebRefused` when the guard says no (at any hop) and
    :class:`WebFetchError` when the request fails or breaks a limit. Non-2xx
    statuses are returned, not raised.
    """
    policy = policy or policy_from_settings()
    limits = policy.limits
    started = time.monotonic()
    deadline = started + limits.timeout
    context = ssl_context
    redirects: list[str] = []
    current = url
    while True:
        target = check_url(current, policy, resolver=resolve_within(_remaining(deadline, "before resolving", limits.timeout)))
        response = _exchange(target, method=method, headers=headers, body=body, deadline=deadline, limits=limits, context=context, cancel=cancel)
        response.redirects = redirects
        if follow_redirects and response.status in _REDIRECTS and response.headers.get("location"):
            if len(redirects) >= limits.max_redirects:
                raise WebFetchError(f"more than {limits.max_redirects} redirects (last to {response.headers['location'][:200]})")
            current = urljoin(target.url, response.headers["location"].strip())
            redirects.append(current)
            if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                method, body = "GET", None
            continue
        response.elapsed = time.monotonic() - started
        return response


def _remaining(deadline: float, what: str, timeout: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise WebFetchError(f"timed out after {timeout:g} s ({what})")
    return left


def _exchange(
    target: Target,
    *,
    method: str,
    headers: Mapping[str, str] | None,
    body: bytes | None,
    deadline: float,
    limits: WebLimits,
    context: ssl.SSLContext | None,
    cancel: Any,
) -> WebResponse:
    timeout = _remaining(deadline, "before connecting", limits.timeout)
    if target.scheme == "https":
        conn: http.client.HTTPConnection = _PinnedHTTPSConnection(target.host, target.port, address=target.address, timeout=timeout, context=context or default_ssl_context())
    else:
        conn = _PinnedHTTPConnection(target.host, target.port, address=target.address, timeout=timeout)
    sent = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate", "Accept": "*/*", "Connection": "close"}
    sent.update(headers or {})
    try:
        try:
            conn.request(method, target.path, body=body, headers=sent)
            conn.sock.settimeout(_remaining(deadline, "waiting for the response", limits.timeout))
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            if isinstance(exc, (TimeoutError, socket.timeout)):
                raise WebFetchError(f"timed out after {limits.timeout:g} s (waiting for {target.host})") from None
            raise WebFetchError(f"request to {target.host}:{target.port} failed: {type(exc).__name__}: {exc}") from None
        got = {k.lower(): v for k, v in resp.getheaders()}
        status = resp.status
        if status in _REDIRECTS:
            raw = b""
        else:
            declared = got.get("content-length", "")
            if declared.isdigit() and int(declared) > limits.max_bytes:
                raise WebFetchError(f"the response is {int(declared)} bytes; the limit is {limits.max_bytes} (NETA_WEB_FETCH_MAX_BYTES)")
            raw = _read_body(conn, resp, deadline=deadline, limits=limits, cancel=cancel)
        return WebResponse(
            url=target.url,
            status=status,
            reason=resp.reason,
            headers=got,
            body=_decode_body(raw, got.get("content-encoding", ""), limits.max_bytes),
            address=target.address,
        )
    finally:
        conn.close()


def _read_body(conn, resp, *, deadline: float, limits: WebLimits, cancel: Any) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        if cancel is not None and cancel.is_set():
            raise WebFetchError("cancelled")
        try:
            if conn.sock is not None:
                conn.sock.settimeout(_remaining(deadline, "reading the body", limits.timeout))
            elif time.monotonic() > deadline:
                raise WebFetchError(f"timed out after {limits.timeout:g} s (reading the body)")
            chunk = resp.read1(READ_CHUNK)
        except (TimeoutError, socket.timeout):
            raise WebFetchError(f"timed out after {limits.timeout:g} s (reading the body)") from None
        except (OSError, http.client.HTTPException) as exc:
            raise WebFetchError(f"reading the response failed: {type(exc).__name__}: {exc}") from None
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limits.max_bytes:
            raise WebFetchError(f"the response is larger than {limits.max_bytes} bytes (NETA_WEB_FETCH_MAX_BYTES)")
        chunks.append(chunk)


def _decode_body(raw: bytes, encoding: str, max_bytes: int) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise WebFetchError(f"unsupported content encoding {encoding!r}")
    wbits = 47 if encoding != "deflate" else 15  # 47: gzip or zlib header, auto-detected
    try:
        inflater = zlib.decompressobj(wbits)
        out = inflater.decompress(raw, max_bytes + 1)
    except zlib.error:
        if encoding == "deflate":  # raw deflate without a zlib header, as some servers send
            try:
                inflater = zlib.decompressobj(-15)
                out = inflater.decompress(raw, max_bytes + 1)
            except zlib.error as exc:
                raise WebFetchError(f"the response body is not valid {encoding}: {exc}") from None
        else:
            raise WebFetchError(f"the response body is not valid {encoding}") from None
    if len(out) > max_bytes or inflater.unconsumed_tail:
        raise WebFetchError(f"the decompressed response is larger than {max_bytes} bytes (NETA_WEB_FETCH_MAX_BYTES)")
    return out
