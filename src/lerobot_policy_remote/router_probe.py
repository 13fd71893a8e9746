"""The pre-flight probe: dial the router's endpoints with a plain socket (and Python's TLS) before zenoh does.

Zenoh reports a refused port only after its connect timeout and a refused client certificate as a timeout;
the probe says within milliseconds which it is. Its finding is a `ZenohConfigError` whose `problem` is a
`Problem` value, worded with the flags of the program that asked (robot, server, verbs, doctor).
"""

from __future__ import annotations

import socket
import ssl

from .zenoh_config import ZenohConfigError, ZenohSettings


class Problem:
    """What `probe_router` found (ZenohConfigError.problem)."""

    REFUSED = "refused"  # nothing listens on that host:port
    UNREACHABLE = "unreachable"  # no answer (host down, firewall)
    ROUTER_CERT = "router_cert"  # the router's certificate does not verify against the CA given
    CERT_REQUIRED = "cert_required"  # an mTLS router and no client certificate
    CERT_REFUSED = "cert_refused"  # the router refused the client certificate (another CA, expired)
    TLS_FILES = "tls_files"  # the CA / certificate / key files cannot be loaded
    NOT_TLS = "not_tls"  # a tls/ endpoint that does not speak TLS


CERT_PROBLEMS = (Problem.ROUTER_CERT, Problem.CERT_REQUIRED, Problem.CERT_REFUSED, Problem.TLS_FILES, Problem.NOT_TLS)


def split_endpoint(endpoint: str) -> tuple[str, str, int]:
    """`tls/host:7447#iface=lo` -> ("tls", "host", 7447); ValueError when it is not proto/host:port."""
    proto, _, rest = endpoint.partition("/")
    host, _, port = rest.split("#", 1)[0].split("?", 1)[0].rpartition(":")
    if not proto or not host or not port.isdigit():
        raise ValueError(f"{endpoint!r} is not an endpoint like tcp/127.0.0.1:7447")
    return proto, host.strip("[]"), int(port)


def probe_router(settings: ZenohSettings, flags: dict[str, str], timeout_s: float = 2.0) -> ZenohConfigError | None:
    """Dial each connect endpoint with a plain socket (and Python's TLS for tls/ ones) before zenoh does.

    Zenoh reports a refused port only after its connect timeout, and a refused certificate as a timeout;
    this says within milliseconds which of them it is, in the words of the program's `flags`. None when
    one endpoint answers (or none can be probed: not tcp/tls); else the error for the first endpoint.
    """
    if settings.mode != "client":
        return None
    found: list[ZenohConfigError] = []
    for endpoint in settings.connect_endpoints:
        try:
            proto, host, port = split_endpoint(endpoint)
        except ValueError:
            return None
        if proto not in ("tcp", "tls"):
            return None
        why = _dial(endpoint, proto, host, port, settings, flags, timeout_s)
        if why is None:
            return None
        found.append(why)
    return found[0] if found else None


def _dial(
    endpoint: str, proto: str, host: str, port: int, s: ZenohSettings, flags: dict[str, str], timeout_s: float
) -> ZenohConfigError | None:
    ca, cert, key = (
        flags.get(n, n) for n in ("tls_root_ca_certificate", "tls_connect_certificate", "tls_connect_private_key")
    )
    listen = f"lerobot-fleet router --listen {endpoint}"
    try:
        raw = socket.create_connection((host, port), timeout=timeout_s)
    except ConnectionRefusedError:
        return ZenohConfigError(
            f"nothing listens at {endpoint} (connection refused): start the router there ({listen}) "
            f"or fix {flags.get('connect_endpoints', 'the endpoint')}",
            Problem.REFUSED,
        )
    except OSError as exc:
        return ZenohConfigError(
            f"no answer from {endpoint} ({exc.strerror or exc}): check the host, the port and the "
            f"firewall, or fix {flags.get('connect_endpoints', 'the endpoint')}",
            Problem.UNREACHABLE,
        )
    with raw:
        if proto != "tls":
            return None
        try:
            ctx = ssl.create_default_context(cafile=s.tls_root_ca_certificate)
            if s.tls_connect_certificate and s.tls_connect_private_key:
                ctx.load_cert_chain(s.tls_connect_certificate, s.tls_connect_private_key)
        except (OSError, ssl.SSLError) as exc:
            return ZenohConfigError(
                f"cannot load the TLS files ({ca} {s.tls_root_ca_certificate}, {cert} "
                f"{s.tls_connect_certificate}, {key} {s.tls_connect_private_key}): {exc}. Check the "
                f"paths and that {cert} and {key} are a matching PEM pair",
                Problem.TLS_FILES,
            )
        try:
            with ctx.wrap_socket(raw, server_hostname=host) as tls:
                tls.settimeout(0.5)
                try:
                    tls.recv(1)  # TLS 1.3 reports a refused client certificate only after the handshake
                except TimeoutError:
                    pass
        except ssl.SSLCertVerificationError as exc:
            return ZenohConfigError(
                f"the router's certificate at {endpoint} does not verify against {ca} {s.tls_root_ca_certificate} "
                f"({exc.verify_message}): pass {ca} the CA that signed the router's certificate, and dial a name the "
                "router's certificate lists (lerobot-fleet pki issue DIR NAME --role router --host HOST)",
                Problem.ROUTER_CERT,
            )
        except ssl.SSLError as exc:
            reason = str(exc.reason or exc)
            if "CERTIFICATE_REQUIRED" in reason:
                return ZenohConfigError(
                    f"the router at {endpoint} requires a client certificate (mTLS) and none was given: "
                    f"pass {cert} and {key} (make them with `lerobot-fleet pki issue DIR NAME --role ROLE`)",
                    Problem.CERT_REQUIRED,
                )
            if "WRONG_VERSION" in reason or "RECORD_LAYER" in reason or "PACKET_LENGTH" in reason:
                return ZenohConfigError(
                    f"{endpoint} does not speak TLS ({reason}): use tcp/ for that port, or the router's tls/ port",
                    Problem.NOT_TLS,
                )
            which = (
                f"the client certificate {s.tls_connect_certificate}" if s.tls_connect_certificate else "this client"
            )
            return ZenohConfigError(
                f"the router at {endpoint} refused {which} ({reason}): it must be signed by the CA the router trusts "
                f"(its --tls-ca) and not expired; pass {cert}/{key} issued by that CA",
                Problem.CERT_REFUSED,
            )
        except OSError as exc:
            return ZenohConfigError(
                f"the router at {endpoint} closed the TLS connection ({exc.strerror or exc}): check "
                f"{ca}, {cert} and {key}",
                Problem.CERT_REFUSED,
            )
    return None
