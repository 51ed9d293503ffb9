#!/usr/bin/python3
"""The S3 rig's front proxy (scripts/s3-rig starts it; docs/storage-rig.md).

Every client of the rig talks to this proxy, never to the stores behind it.
It listens on two ports of 127.0.0.1:

  s3    in front of s3rver. Each request's AWS Signature Version 4 is checked
        here, by botocore's signer with the rig's secret (s3rver accepts any
        signature), and a request that S3 would refuse gets S3's error:
        403 SignatureDoesNotMatch, 403 InvalidAccessKeyId, 403 AccessDenied
        (no signature, or an expired presigned URL), 403 InvalidToken,
        403 RequestTimeTooSkewed, 400 AuthorizationHeaderMalformed (a wrong
        region in the credential scope, naming the rig's), 400 InvalidRequest
        (no x-amz-content-sha256). With slowdown_every K, every K-th request
        that passes the check is answered 503 SlowDown instead.
  http  in front of nginx, plain pass-through: no signature, no SlowDown.

On both, what passes is forwarded byte for byte and streamed both ways
(Content-Length or chunked bodies, HTTP/1.1 keep-alive, Expect: 100-continue),
and the same injector shapes every response:
  latency_ms N  the response's first byte leaves no earlier than N ms after
                the request's last byte arrived (a floor on the time to first
                byte: the store's own time is inside it, not added to it);
                each request waits on its own thread;
  mbps M        each body, either way, at most M MB/s (10^6 bytes) per
                connection, paced in 20 ms slices.

GET /__rig/stats on either port returns the counters as JSON; POST
/__rig/config with a JSON object of latency_ms, mbps, slowdown_every changes
them while running (0 or null turns one off; the SlowDown count restarts).
Bucket names cannot start with "_", so these paths never reach a store.

Bounded: one thread per connection, at most MAX_CONNECTIONS at once (accept
waits beyond); request heads up to 64 KiB; bodies move in 64 KiB pieces,
never buffered whole; every socket read has a timeout. A refused request's
body (without Expect: 100-continue) is read and dropped before the answer, up
to 256 MiB, so that a client which sends it all first still reads the answer.
"""

import argparse
import datetime
import hmac
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import uuid
from urllib.parse import quote, unquote

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest, HTTPHeaders
from botocore.credentials import Credentials

MAX_HEAD = 64 * 1024
PIECE = 64 * 1024
MAX_CONNECTIONS = 1024
IDLE_TIMEOUT_S = 75.0       # a keep-alive connection with no new request
IO_TIMEOUT_S = 60.0         # within a request: a read that gets nothing
UPSTREAM_TIMEOUT_S = 120.0  # the store's answer
DRAIN_LIMIT = 256 * 1024 * 1024  # a refused request's body is read and dropped up to this, then answered
MAX_SKEW_S = 15 * 60        # S3's limit on x-amz-date against the clock
PACE_SLICE_S = 0.02


class Malformed(Exception):
    """A request the proxy cannot frame: answered 400 and the connection closed."""


class Head:
    """An HTTP message head as received: start line, headers, the raw bytes."""

    def __init__(self, start, headers, raw):
        self.start = start
        self.headers = headers  # [(name, value)] in order
        self.raw = raw

    def get(self, name, default=None):
        name = name.lower()
        found = default
        for key, value in self.headers:
            if key.lower() == name:
                found = value
        return found

    def get_all(self, name):
        name = name.lower()
        return [value for key, value in self.headers if key.lower() == name]


def read_head(rfile):
    """The next head from rfile; None at a clean end of the stream."""
    raw = bytearray()
    lines = []
    while True:
        line = rfile.readline(MAX_HEAD + 1)
        if not line:
            if not raw:
                return None
            raise Malformed("the connection ended inside a message head")
        if line in (b"\r\n", b"\n"):
            if not lines:
                continue  # empty lines before a request line are allowed
            raw += line
            break
        raw += line
        if len(raw) > MAX_HEAD:
            raise Malformed("a message head over 64 KiB")
        lines.append(line.rstrip(b"\r\n").decode("latin-1"))
    headers = []
    for text in lines[1:]:
        name, colon, value = text.partition(":")
        if not colon or not name or name != name.strip():
            raise Malformed(f"a header line without a name: {text[:80]!r}")
        headers.append((name, value.strip()))
    return Head(lines[0], headers, bytes(raw))


def body_framing(head, is_request, method=None, status=None):
    """('length', n), ('chunked', None) or ('close', None) for a message."""
    if not is_request:
        if method == "HEAD" or 100 <= status < 200 or status in (204, 304):
            return ("length", 0)
    encoding = head.get("transfer-encoding")
    if encoding is not None:
        if encoding.lower().replace(" ", "").split(",")[-1] != "chunked":
            if is_request:
                raise Malformed(f"Transfer-Encoding {encoding!r} without chunked last")
            return ("close", None)
        return ("chunked", None)
    length = head.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise Malformed(f"Content-Length {length!r}")
        return ("length", int(length))
    return ("length", 0) if is_request else ("close", None)


class Pacer:
    """Sends a body at most rate bytes/s (None: as fast as the socket takes it)."""

    def __init__(self, mbps):
        self.rate = mbps * 1e6 if mbps else None
        self.start = None
        self.sent = 0

    def send(self, sock, data):
        if not data:
            return
        if self.rate is None:
            sock.sendall(data)
            return
        view = memoryview(data)
        piece = max(1024, int(self.rate * PACE_SLICE_S))
        for offset in range(0, len(view), piece):
            part = view[offset:offset + piece]
            now = time.monotonic()
            if self.start is None:
                self.start = now
            due = self.start + self.sent / self.rate
            if due > now:
                time.sleep(due - now)
            sock.sendall(part)
            self.sent += len(part)


class NullSink:
    """Where a refused request's body goes (bounded by the caller)."""

    def __init__(self, limit):
        self.left = limit

    def sendall(self, data):
        self.left -= len(data)
        if self.left < 0:
            raise Malformed("a refused request's body over the drain limit")


def copy_body(framing, rfile, sock, pacer):
    """Streams one body from rfile to sock. Returns False when it ended the stream."""
    kind, length = framing
    if kind == "length":
        left = length
        while left:
            data = rfile.read1(min(PIECE, left))
            if not data:
                raise ConnectionError("the connection ended inside a body")
            pacer.send(sock, data)
            left -= len(data)
        return True
    if kind == "chunked":
        while True:
            line = rfile.readline(1024)
            if not line.endswith(b"\n"):
                raise Malformed("a chunk size line over 1 KiB or cut off")
            pacer.send(sock, line)
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError as e:
                raise Malformed(f"a chunk size {line[:40]!r}") from e
            if size == 0:
                while True:  # trailers, then the empty line
                    line = rfile.readline(MAX_HEAD)
                    if not line.endswith(b"\n"):
                        raise Malformed("a trailer cut off")
                    pacer.send(sock, line)
                    if line in (b"\r\n", b"\n"):
                        return True
            copy_body(("length", size + 2), rfile, sock, pacer)  # the data and its CRLF
    while True:  # until the sender closes
        data = rfile.read1(PIECE)
        if not data:
            return False
        pacer.send(sock, data)


def wants_close(head, version):
    tokens = [t.strip().lower() for v in head.get_all("connection") for t in v.split(",")]
    if "close" in tokens:
        return True
    return version == "HTTP/1.0" and "keep-alive" not in tokens


class Settings:
    """What the injector does now and what it counted; shared by every thread."""

    def __init__(self, latency_ms, mbps, slowdown_every):
        self.lock = threading.Lock()
        self.latency_ms = latency_ms
        self.mbps = mbps
        self.slowdown_every = slowdown_every
        self.signed_ok = 0  # requests past the signature check since the last config
        self.counts = {"s3_requests": 0, "http_requests": 0, "forwarded": 0, "slowdowns": 0,
                       "refused": {}, "upstream_errors": 0, "connections": 0}

    def snapshot(self):
        with self.lock:
            return self.latency_ms, self.mbps

    def count(self, key, code=None):
        with self.lock:
            if code is None:
                self.counts[key] += 1
            else:
                self.counts[key][code] = self.counts[key].get(code, 0) + 1

    def slowdown_due(self):
        with self.lock:
            self.signed_ok += 1
            return bool(self.slowdown_every) and self.signed_ok % self.slowdown_every == 0

    def as_json(self):
        with self.lock:
            return {"latency_ms": self.latency_ms, "mbps": self.mbps,
                    "slowdown_every": self.slowdown_every,
                    "counts": json.loads(json.dumps(self.counts))}

    def update(self, changes):
        with self.lock:
            for key in ("latency_ms", "mbps", "slowdown_every"):
                if key in changes:
                    value = changes[key] or 0
                    if not isinstance(value, (int, float)) or value < 0:
                        raise ValueError(f"{key}: a number >= 0, not {changes[key]!r}")
                    setattr(self, key, int(value) if key == "slowdown_every" else value)
            self.signed_ok = 0


class Refusal:
    """An S3 error the proxy answers itself."""

    REASONS = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 502: "Bad Gateway",
               503: "Service Unavailable"}

    def __init__(self, status, code, message, fields=(), headers=()):
        self.status = status
        self.code = code
        self.message = message
        self.fields = list(fields)
        self.headers = list(headers)

    def response(self, method, close):
        request_id = uuid.uuid4().hex[:16].upper()
        body = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>",
                f"<Code>{self.code}</Code><Message>{xml_escape(self.message)}</Message>"]
        for name, value in self.fields:
            body.append(f"<{name}>{xml_escape(str(value))}</{name}>")
        body.append(f"<RequestId>{request_id}</RequestId><HostId>feedtune-s3-rig</HostId></Error>")
        payload = "".join(body).encode("utf-8")
        lines = [f"HTTP/1.1 {self.status} {self.REASONS.get(self.status, 'Error')}",
                 f"x-amz-request-id: {request_id}",
                 "x-amz-id-2: feedtune-s3-rig",
                 "Date: " + time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()),
                 "Server: feedtune-s3-rig",
                 "Content-Type: application/xml",
                 f"Content-Length: {len(payload)}",
                 "Connection: " + ("close" if close else "keep-alive")]
        lines += [f"{name}: {value}" for name, value in self.headers]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if method == "HEAD" else head + payload


def xml_escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;")


class RigSigner(S3SigV4Auth):
    """botocore's S3 SigV4 signer over exactly the headers the client signed,
    with the payload hash the client declared."""

    def __init__(self, credentials, region, payload_hash, signed_names):
        super().__init__(credentials, "s3", region)
        self._payload_hash = payload_hash
        self._signed_names = signed_names

    def headers_to_sign(self, request):
        header_map = HTTPHeaders()
        for name in self._signed_names:
            for value in request.headers.get_all(name) or []:
                header_map[name] = value
        return header_map

    def payload(self, request):
        return self._payload_hash


def split_query(query):
    """[(key, value)] decoded, in order ('+' stays '+', as S3 reads it)."""
    pairs = []
    for part in query.split("&") if query else []:
        key, _, value = part.partition("=")
        pairs.append((unquote(key), unquote(value)))
    return pairs


class SignatureCheck:
    """Checks a request's SigV4 signature as S3 would, with the rig's keys."""

    def __init__(self, access_key, secret, region, session_token):
        self.access_key = access_key
        self.secret = secret
        self.region = region
        self.session_token = session_token

    def check(self, method, target, head):
        """None when S3 would accept the request's signature, else a Refusal."""
        path, _, query = target.partition("?")
        params = split_query(query)
        names = {key for key, _ in params}
        authorization = head.get("authorization")
        if "X-Amz-Algorithm" in names:
            if authorization is not None:
                return Refusal(400, "InvalidArgument", "Only one auth mechanism allowed; only the X-Amz-Algorithm "
                               "query parameter or the Authorization header should be specified")
            return self._check_query(method, path, params, head)
        if authorization is None:
            if "Signature" in names or "AWSAccessKeyId" in names:
                return Refusal(400, "InvalidRequest", "The rig accepts only AWS4-HMAC-SHA256 (Signature Version 4)")
            return Refusal(403, "AccessDenied", "Access Denied (the request is not signed)")
        algorithm, _, rest = authorization.partition(" ")
        if algorithm != "AWS4-HMAC-SHA256":
            return Refusal(400, "InvalidRequest", "The rig accepts only AWS4-HMAC-SHA256 (Signature Version 4), "
                           f"not {algorithm!r}")
        components = {}
        for component in rest.split(","):
            key, eq, value = component.strip().partition("=")
            if eq:
                components[key] = value
        missing = [k for k in ("Credential", "SignedHeaders", "Signature") if k not in components]
        if missing:
            return Refusal(400, "AuthorizationHeaderMalformed", "The authorization header is malformed; "
                           f"missing {', '.join(missing)}.")
        amz_date = head.get("x-amz-date")
        payload_hash = head.get("x-amz-content-sha256")
        if payload_hash is None:
            return Refusal(400, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256")
        return self._verify(method, path, params, head, components["Credential"],
                            components["SignedHeaders"], components["Signature"], amz_date, payload_hash, None)

    def _check_query(self, method, path, params, head):
        values = dict(params)
        for key in ("X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Signature"):
            if key not in values:
                return Refusal(400, "AuthorizationQueryParametersError",
                               f"Query-string authentication version 4 requires {key}")
        if values.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
            return Refusal(400, "AuthorizationQueryParametersError",
                           "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"")
        signed_params = [(k, v) for k, v in params if k != "X-Amz-Signature"]
        expires = values.get("X-Amz-Expires", "")
        if not expires.isdigit():
            return Refusal(400, "AuthorizationQueryParametersError", "X-Amz-Expires must be a number of seconds")
        return self._verify(method, path, signed_params, head, values["X-Amz-Credential"],
                            values["X-Amz-SignedHeaders"], values["X-Amz-Signature"], values["X-Amz-Date"],
                            "UNSIGNED-PAYLOAD", int(expires))

    def _verify(self, method, path, params, head, credential, signed_headers, signature, amz_date,
                payload_hash, expires):
        scope = credential.split("/")
        if len(scope) != 5 or scope[4] != "aws4_request":
            return Refusal(400, "AuthorizationHeaderMalformed", "The authorization header is malformed; the "
                           f"Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
        key_id, _, region, service, _ = scope
        if key_id != self.access_key:
            return Refusal(403, "InvalidAccessKeyId",
                           "The AWS Access Key Id you provided does not exist in our records.",
                           [("AWSAccessKeyId", key_id)])
        if region != self.region:
            return Refusal(400, "AuthorizationHeaderMalformed", "The authorization header is malformed; the region "
                           f"'{region}' is wrong; expecting '{self.region}'", [("Region", self.region)],
                           [("x-amz-bucket-region", self.region)])
        if service != "s3":
            return Refusal(400, "AuthorizationHeaderMalformed", "The authorization header is malformed; the "
                           f"service '{service}' is wrong; expecting 's3'")
        try:
            when = datetime.datetime.strptime(amz_date or "", "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            return Refusal(403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
        now = datetime.datetime.now(datetime.timezone.utc)
        if expires is None and abs((now - when).total_seconds()) > MAX_SKEW_S:
            return Refusal(403, "RequestTimeTooSkewed",
                           "The difference between the request time and the current time is too large.",
                           [("RequestTime", amz_date), ("ServerTime", now.strftime("%Y-%m-%dT%H:%M:%SZ"))])
        if expires is not None and (now - when).total_seconds() > expires:
            return Refusal(403, "AccessDenied", "Request has expired",
                           [("X-Amz-Expires", expires), ("Expires", (when + datetime.timedelta(seconds=expires))
                                                         .strftime("%Y-%m-%dT%H:%M:%SZ"))])
        names = [n for n in signed_headers.lower().split(";") if n]
        if "host" not in names:
            return Refusal(400, "AuthorizationHeaderMalformed",
                           "The authorization header is malformed; SignedHeaders must include host")
        headers = HTTPHeaders()
        for name in names:
            for value in head.get_all(name):
                headers[name] = value
        canonical_path = quote(unquote(path), safe="/")
        request = AWSRequest(method=method, url="http://" + (head.get("host") or "") + canonical_path,
                             headers=headers, params=params)
        request.headers = headers  # AWSRequest copies a mapping and keeps one value a name
        request.context["timestamp"] = amz_date
        signer = RigSigner(Credentials(self.access_key, self.secret), region, payload_hash, names)
        canonical = signer.canonical_request(request)
        string_to_sign = signer.string_to_sign(request, canonical)
        expected = signer.signature(string_to_sign, request)
        if not hmac.compare_digest(expected, signature):
            return Refusal(403, "SignatureDoesNotMatch",
                           "The request signature we calculated does not match the signature you provided. "
                           "Check your key and signing method.",
                           [("AWSAccessKeyId", key_id), ("StringToSign", string_to_sign),
                            ("SignatureProvided", signature), ("CanonicalRequest", canonical)])
        token = head.get("x-amz-security-token") if expires is None else dict(params).get("X-Amz-Security-Token")
        if token != self.session_token:
            what = "The provided token is malformed or otherwise invalid." if token else \
                "The request has no x-amz-security-token and the rig's credentials need one."
            return Refusal(403, "InvalidToken", what)
        return None


class Proxy:
    def __init__(self, args):
        self.args = args
        self.settings = Settings(args.latency_ms, args.mbps, args.slowdown_every)
        self.signature = SignatureCheck(args.access_key, args.secret, args.region, args.session_token or None)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def log(self, text):
        sys.stderr.write(time.strftime("%H:%M:%S ") + text + "\n")
        sys.stderr.flush()

    def serve(self, listener, mode, upstream_port):
        while True:
            self.slots.acquire()
            try:
                conn, _ = listener.accept()
            except OSError:
                self.slots.release()
                continue
            thread = threading.Thread(target=self.connection, args=(conn, mode, upstream_port), daemon=True)
            thread.start()

    def connection(self, client, mode, upstream_port):
        self.settings.count("connections")
        upstream = None
        rfile = None
        try:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rfile = client.makefile("rb", buffering=PIECE)
            while True:
                client.settimeout(IDLE_TIMEOUT_S)
                try:
                    head = read_head(rfile)
                except (socket.timeout, ConnectionError):
                    break
                if head is None:
                    break
                client.settimeout(IO_TIMEOUT_S)
                keep, upstream = self.exchange(client, rfile, head, mode, upstream, upstream_port)
                if not keep:
                    break
        except Malformed as e:
            self.log(f"{mode}: closing a connection: {e}")
            try:
                client.sendall(Refusal(400, "BadRequest", str(e)).response("GET", True))
            except OSError:
                pass
        except (socket.timeout, ConnectionError, OSError) as e:
            if self.args.verbose:
                self.log(f"{mode}: a connection ended: {e!r}")
        finally:
            close_pair(upstream)
            close_pair((client, rfile))
            self.slots.release()

    def exchange(self, client, rfile, head, mode, upstream, upstream_port):
        """One request and its response. Returns (keep the connection, the upstream connection)."""
        parts = head.start.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise Malformed(f"a request line {head.start[:80]!r}")
        method, target, version = parts
        close = wants_close(head, version)
        framing = body_framing(head, True)
        self.settings.count("s3_requests" if mode == "s3" else "http_requests")
        if target.startswith("/__rig/"):
            return self.control(client, rfile, method, target, framing, close), upstream
        refusal = None
        if mode == "s3":
            refusal = self.signature.check(method, target, head)
            if refusal is None and self.settings.slowdown_due():
                refusal = Refusal(503, "SlowDown", "Please reduce your request rate.")
        if refusal is not None:
            self.settings.count("refused" if refusal.code != "SlowDown" else "slowdowns",
                                refusal.code if refusal.code != "SlowDown" else None)
            if self.args.verbose or refusal.code != "SlowDown":
                self.log(f"{mode}: {method} {target[:200]} -> {refusal.status} {refusal.code}: {refusal.message}")
            return self.refuse(client, rfile, head, method, framing, close, refusal), upstream
        return self.forward(client, rfile, head, method, framing, close, upstream, upstream_port, mode)

    def wait_latency(self, since):
        latency_ms, _ = self.settings.snapshot()
        delay = since + latency_ms / 1000.0 - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def refuse(self, client, rfile, head, method, framing, close, refusal):
        """Answers a refusal; reads and drops a small body so the connection can go on."""
        has_body = framing != ("length", 0)
        expect = (head.get("expect") or "").lower() == "100-continue"
        if has_body and (expect or (framing[0] == "length" and framing[1] > DRAIN_LIMIT)):
            close = True  # the client sends no body after a final answer to Expect, or it is too big to read
        elif has_body:
            try:
                copy_body(framing, rfile, NullSink(DRAIN_LIMIT), Pacer(None))
            except Malformed:
                close = True
        self.wait_latency(time.monotonic())
        client.sendall(refusal.response(method, close))
        if close and has_body and not expect:
            linger(client)
        return not close

    def connect_upstream(self, port):
        sock = socket.create_connection(("127.0.0.1", port), timeout=UPSTREAM_TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock, sock.makefile("rb", buffering=PIECE)

    def forward(self, client, rfile, head, method, framing, close, upstream, upstream_port, mode):
        latency_ms, mbps = self.settings.snapshot()
        expect = (head.get("expect") or "").lower() == "100-continue"
        bodyless = framing == ("length", 0)
        for attempt in (0, 1):
            reused = upstream is not None
            if upstream is not None and readable_now(upstream[0]):
                close_pair(upstream)  # the store closed it while idle
                upstream, reused = None, False
            if upstream is None:
                try:
                    upstream = self.connect_upstream(upstream_port)
                except OSError as e:
                    return self.store_failed(client, method, mode, upstream_port, e), None
            try:
                upstream[0].sendall(head.raw)
                if attempt == 0 and expect and not bodyless:
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                copy_body(framing, rfile, upstream[0], Pacer(mbps))
                done = time.monotonic()
                while True:  # interim 1xx answers (the store's own 100 Continue) are not relayed
                    response = read_head(upstream[1])
                    if response is None:
                        raise ConnectionError("the store closed the connection before answering")
                    status = int(response.start.split(" ")[1])
                    if status >= 200 or status == 101:
                        break
                break
            except (ConnectionError, socket.timeout, Malformed, ValueError, IndexError) as e:
                close_pair(upstream)
                upstream = None
                if attempt == 0 and reused and bodyless and not isinstance(e, socket.timeout):
                    continue  # a kept connection the store had dropped: once more on a new one
                return self.store_failed(client, method, mode, upstream_port, e), None
        self.wait_latency(done)
        self.settings.count("forwarded")
        client.sendall(response.raw)
        response_framing = body_framing(response, False, method, status)
        copy_body(response_framing, upstream[1], client, Pacer(mbps))
        if response_framing[0] == "close" or wants_close(response, response.start.split(" ")[0]):
            close_pair(upstream)
            upstream = None
            close = True if response_framing[0] == "close" else close
        return not close, upstream

    def store_failed(self, client, method, mode, port, error):
        self.settings.count("upstream_errors")
        store = "s3rver" if mode == "s3" else "nginx"
        self.log(f"{mode}: {store} on 127.0.0.1:{port} failed: {error!r}")
        refusal = Refusal(502, "BadGateway", f"the rig's {store} on 127.0.0.1:{port} did not answer: {error}")
        try:
            client.sendall(refusal.response(method, True))
        except OSError:
            pass
        return False

    def control(self, client, rfile, method, target, framing, close):
        body = b""
        if framing != ("length", 0):
            if framing[0] != "length" or framing[1] > 4096:
                raise Malformed("a /__rig/ request body over 4 KiB or chunked")
            body = rfile.read(framing[1])
        status, answer = 200, None
        if target == "/__rig/stats" and method == "GET":
            answer = self.settings.as_json()
        elif target == "/__rig/config" and method in ("POST", "PUT"):
            try:
                changes = json.loads(body or b"{}")
                if not isinstance(changes, dict):
                    raise ValueError("a JSON object of latency_ms, mbps, slowdown_every")
                self.settings.update(changes)
                answer = self.settings.as_json()
                self.log(f"config: latency_ms={answer['latency_ms']} mbps={answer['mbps']} "
                         f"slowdown_every={answer['slowdown_every']}")
            except ValueError as e:
                status, answer = 400, {"error": str(e)}
        else:
            status, answer = 404, {"error": "GET /__rig/stats or POST /__rig/config"}
        payload = (json.dumps(answer) + "\n").encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
        client.sendall((f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: {len(payload)}\r\nConnection: {'close' if close else 'keep-alive'}"
                        "\r\n\r\n").encode() + payload)
        return not close


def readable_now(sock):
    """Whether `sock` has something to read (or was closed) right now. poll,
    not select: select refuses a descriptor numbered 1024 or more, which a
    job with hundreds of connections in flight reaches."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def close_pair(pair):
    """Closes a (socket, its reader): the socket's descriptor stays open while its reader does."""
    if pair is None:
        return
    for part in reversed(pair):
        if part is not None:
            try:
                part.close()
            except OSError:
                pass


def linger(sock):
    """After an answer that closes: let the client finish sending, briefly, so
    that closing does not reset the connection before it reads the answer."""
    try:
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(2.0)
        deadline = time.monotonic() + 2.0
        drained = 0
        while time.monotonic() < deadline and drained < DRAIN_LIMIT:
            data = sock.recv(PIECE)
            if not data:
                break
            drained += len(data)
    except OSError:
        pass


def listen(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(512)
    return sock


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--s3-upstream", type=int, required=True, help="s3rver's port on 127.0.0.1")
    parser.add_argument("--http-upstream", type=int, required=True, help="nginx's port on 127.0.0.1")
    parser.add_argument("--s3-port", type=int, default=0, help="0: a free port")
    parser.add_argument("--http-port", type=int, default=0, help="0: a free port")
    parser.add_argument("--port-file", required=True, help="written when listening: {\"s3\": P, \"http\": P}")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--access-key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--session-token", default="")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--mbps", type=float, default=0.0, help="MB/s per connection (10^6 bytes); 0: no cap")
    parser.add_argument("--slowdown-every", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="log every SlowDown and ended connection")
    args = parser.parse_args()

    threading.stack_size(512 * 1024)
    proxy = Proxy(args)
    s3 = listen(args.s3_port)
    http = listen(args.http_port)
    ports = {"s3": s3.getsockname()[1], "http": http.getsockname()[1], "pid": os.getpid()}
    for listener, mode, upstream in ((s3, "s3", args.s3_upstream), (http, "http", args.http_upstream)):
        threading.Thread(target=proxy.serve, args=(listener, mode, upstream), daemon=True).start()
    temporary = args.port_file + ".tmp"
    with open(temporary, "w") as f:
        json.dump(ports, f)
    os.replace(temporary, args.port_file)
    proxy.log(f"listening: s3 on 127.0.0.1:{ports['s3']} -> s3rver :{args.s3_upstream}, http on "
              f"127.0.0.1:{ports['http']} -> nginx :{args.http_upstream}; latency_ms={args.latency_ms} "
              f"mbps={args.mbps} slowdown_every={args.slowdown_every} region={args.region}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(3600):
        pass
    proxy.log("stopped (SIGTERM)")


if __name__ == "__main__":
    main()
