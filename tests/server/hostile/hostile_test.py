#!/usr/bin/env python3
"""Hostile clients against a real `mxserve serve` of the bundled model (issue 26): one check per
item of the issue, each with raw sockets (no HTTP library between the bytes and the server).

Usage: hostile_test.py MXSERVE_BIN MODEL_DIR ITEM   (ITEM: 01 .. 17, or a name below)

Each run starts its own server on a free loopback port and stops it. Only event deadlines are
asserted (generous: the CI host is slow and runs sanitizers), never a measured time. With
MXSERVE_HOSTILE_OLD_FLAGS=1 the flags that the pre-#26 server lacks are left out, so that the
same checks can be run against an old binary to see them fail.
"""
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN, MODEL, ITEM = sys.argv[1], sys.argv[2], sys.argv[3]
OLD = os.environ.get("MXSERVE_HOSTILE_OLD_FLAGS") == "1"
DEADLINE = 20.0  # seconds any single expected event may take on a loaded host


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


class Server:
    def __init__(self, flags=(), new_flags=(), env=None):
        args = [BIN, "serve", MODEL, "--served-model-name", "arith", "--host", "127.0.0.1",
                "--port", "0", "--threads", "1", "--page-size", "16", *flags]
        if not OLD:
            args += list(new_flags)
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})
        self.port = None
        t0 = time.time()
        while time.time() - t0 < 60:
            self.log.seek(0)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if self.port is None:
            self.stop()
            self.log.seek(0)
            raise Fail("the server did not start:\n" + self.log.read())
        while time.time() - t0 < 120:
            try:
                if request(self.port, "GET", "/health", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise Fail("the server never became healthy")

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Conn:
    """A client socket; bytes read past one response wait in .buf for the next."""

    def __init__(self, port, timeout):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def recv(self, n):
        if self.buf:
            out, self.buf = self.buf, b""
            return out
        return self.sock.recv(n)

    def sendall(self, data):
        self.sock.sendall(data)

    def settimeout(self, t):
        self.sock.settimeout(t)

    def close(self):
        self.sock.close()


def connect(port, timeout=DEADLINE):
    return Conn(port, timeout)


def read_response(s):
    """Reads one response from socket s: (status, headers dict (lower-case), body bytes)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise Fail("connection closed before a response head (got %r)" % buf[:200])
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(rest) < n:
            chunk = s.recv(65536)
            if not chunk:
                raise Fail("connection closed inside a body")
            rest += chunk
        s.buf = rest[n:]
        return status, headers, rest[:n]
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            while b"\r\n" not in rest:
                chunk = s.recv(65536)
                if not chunk:
                    raise Fail("connection closed inside a chunked body")
                rest += chunk
            size_line, rest = rest.split(b"\r\n", 1)
            n = int(size_line.split(b";")[0], 16)
            while len(rest) < n + 2:
                chunk = s.recv(65536)
                if not chunk:
                    raise Fail("connection closed inside a chunk")
                rest += chunk
            body += rest[:n]
            rest = rest[n + 2:]
            if n == 0:
                s.buf = rest
                return status, headers, body
    while True:  # delimited by the connection's end
        chunk = s.recv(65536)
        if not chunk:
            return status, headers, rest
        rest += chunk


def raw(port, data, timeout=DEADLINE):
    s = connect(port, timeout)
    try:
        s.sendall(data)
        return read_response(s)
    finally:
        s.close()


def request(port, method, path, body=None, headers=None, timeout=DEADLINE):
    h = {"Host": "x", "Connection": "close", **(headers or {})}
    data = body.encode() if isinstance(body, str) else body
    if data is not None:
        h.setdefault("Content-Type", "application/json")
        h["Content-Length"] = str(len(data))
    head = "%s %s HTTP/1.1\r\n%s\r\n" % (method, path, "".join(
        "%s: %s\r\n" % kv for kv in h.items()))
    return raw(port, head.encode() + (data or b""), timeout)


def healthy(srv):
    check(srv.alive(), "the server process died")
    st, _, body = request(srv.port, "GET", "/health", timeout=DEADLINE)
    check(st == 200, "/health after the attack: %d %r" % (st, body))


def error_of(body):
    j = json.loads(body)
    check("error" in j, "not an OpenAI error body: %r" % body[:300])
    return j["error"]


def metric(srv, name):
    _, _, body = request(srv.port, "GET", "/metrics")
    m = re.search(re.escape(name) + r'\{model="arith"\} (\S+)', body.decode())
    return float(m.group(1)) if m else None


def wait_for(cond, what, deadline=DEADLINE):
    t0 = time.time()
    while time.time() - t0 < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise Fail("not within %.0f s: %s" % (deadline, what))


# ---- one check per item of issue 26 ----

def item01_deep_json(srv):
    d = 200000
    body = '{"x":' + "[" * d + "]" * d + ',"y":1}'
    for path in ("/tokenize", "/v1/chat/completions", "/generate"):
        st, _, b = request(srv.port, "POST", path, body)
        check(st == 400, "%s: %d %r" % (path, st, b[:200]))
        e = error_of(b)
        check("256" in e["message"], "the error names the limit: %r" % e)
    healthy(srv)


def item02_slowloris_and_idle(srv):
    # More slow heads and idle connections than the server has request threads (16): a normal
    # client is still answered, and a slow head is cut off with 408 at its deadline.
    slow = []
    for _ in range(64):
        s = connect(srv.port)
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        slow.append(s)
    idle = [connect(srv.port) for _ in range(64)]
    time.sleep(0.5)
    st, _, _ = request(srv.port, "GET", "/health", timeout=DEADLINE)
    check(st == 200, "/health with 128 slow/idle connections open: %d" % st)
    st, _, b = request(srv.port, "POST", "/v1/completions",
                       '{"prompt":"1+1=","max_tokens":4,"temperature":0}')
    check(st == 200, "a completion with 128 slow/idle connections open: %d %r" % (st, b[:200]))
    slow[0].settimeout(DEADLINE)
    st, _, b = read_response(slow[0])
    check(st == 408, "a head that never ends: %d %r" % (st, b[:200]))
    check("head" in error_of(b)["message"], "names the head deadline")
    for s in slow + idle:
        s.close()
    healthy(srv)


def item03_decompression_bomb(srv):
    pad = b'{"rid":"none","pad":"' + b"a" * (8 << 20) + b'"}'
    bomb = gzip.compress(pad, 9)
    check(len(bomb) < 64 << 10, "the bomb is small")
    for enc, body in (("gzip", bomb), ("br", b"\x1b\xff\xff")):
        st, _, b = request(srv.port, "POST", "/abort_request", body,
                           {"Content-Encoding": enc})
        check(st == 415, "Content-Encoding %s: %d %r" % (enc, st, b[:200]))
        check(enc in error_of(b)["message"], "names the encoding")
    st, _, _ = request(srv.port, "POST", "/abort_request", '{"rid":"x"}',
                       {"Content-Encoding": "identity"})
    check(st == 200, "identity is accepted: %d" % st)
    healthy(srv)


def item04_chunked_and_header_limits(srv):
    # A chunked body past --max-request-bytes (1 MB here).
    s = connect(srv.port)
    s.sendall(b"POST /abort_request HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"a" * 65536
    try:
        s.sendall(b'13\r\n{"rid":"x","pad":"a\r\n')
        for _ in range(20):
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    except OSError:
        pass  # the server may close once it has answered
    st, _, b = read_response(s)
    s.close()
    check(st == 413, "a 1.3 MB chunked body: %d %r" % (st, b[:200]))
    # Too many header fields, and one header larger than the head limit.
    many = "".join("X-H%d: v\r\n" % i for i in range(150))
    st, _, b = raw(srv.port, ("GET /health HTTP/1.1\r\nHost: x\r\n%s\r\n" % many).encode())
    check(st == 431, "150 header fields: %d %r" % (st, b[:200]))
    st, _, b = raw(srv.port, ("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n" %
                              ("b" * 40000)).encode())
    check(st == 431, "a 40 KB header: %d %r" % (st, b[:200]))
    healthy(srv)


def item05_disconnect_aborts_every_mode(srv):
    body = {"prompt": "1", "max_tokens": 20000, "ignore_eos": True, "temperature": 0}
    # Messages and Responses have no ignore_eos: a schema of a long string keeps them going.
    long_text = {"type": "json_schema", "schema": {"type": "string", "minLength": 5000}}
    msgs = {"max_tokens": 20000, "messages": [{"role": "user", "content": "1"}],
            "output_format": long_text}
    resp = {"max_output_tokens": 20000, "input": "1",
            "text": {"format": dict(long_text, name="s")}}
    cmpl = "/v1/completions"
    modes = [("non-stream gzip", cmpl, dict(body), {"Accept-Encoding": "gzip"}),
             ("non-stream", cmpl, dict(body), {}),
             ("stream gzip", cmpl, dict(body, stream=True), {"Accept-Encoding": "gzip"}),
             ("non-stream n=2", cmpl, dict(body, n=2), {"Accept-Encoding": "gzip, br"}),
             ("messages", "/v1/messages", msgs, {}),
             ("messages stream", "/v1/messages", dict(msgs, stream=True), {}),
             ("responses", "/v1/responses", resp, {}),
             ("responses stream", "/v1/responses", dict(resp, stream=True), {})]
    for name, path, b, h in modes:
        before = metric(srv, "mxserve:client_disconnects_total") or 0
        data = json.dumps(b).encode()
        head = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n%s\r\n" % (path, len(data), "".join(
                    "%s: %s\r\n" % kv for kv in h.items())))
        s = connect(srv.port)
        s.sendall(head.encode() + data)
        wait_for(lambda: (metric(srv, "mxserve:num_requests_running") or 0) > 0,
                 "%s: the request runs" % name)
        s.close()
        wait_for(lambda: (metric(srv, "mxserve:client_disconnects_total") or 0) > before,
                 "%s: the hang-up aborts the request" % name)
        wait_for(lambda: metric(srv, "mxserve:num_requests_running") == 0,
                 "%s: nothing left running" % name)
    healthy(srv)


def item06_flush_cache_without_body(srv):
    st, _, b = raw(srv.port, b"POST /flush_cache HTTP/1.1\r\nHost: x\r\n\r\n", timeout=DEADLINE)
    check(st == 200, "POST /flush_cache with no body: %d %r" % (st, b[:200]))


def item07_abort_all_wrong_type(srv):
    for v in ('"yes"', "1", "[]"):
        st, _, b = request(srv.port, "POST", "/abort_request", '{"abort_all":%s}' % v)
        check(st == 400, "abort_all %s: %d %r" % (v, st, b[:200]))
        check(error_of(b)["param"] == "abort_all", "names abort_all: %r" % b)


def item08_duplicate_rid(srv):
    body = json.dumps({"text": "1", "rid": "dup", "stream": True, "sampling_params": {
        "max_new_tokens": 20000, "ignore_eos": True, "temperature": 0}}).encode()
    head = ("POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % len(body)).encode()
    first = connect(srv.port)
    first.sendall(head + body)
    wait_for(lambda: (metric(srv, "mxserve:num_requests_running") or 0) > 0, "the first runs")
    second = body.replace(b'"stream": true', b'"stream": false')
    st, _, b = request(srv.port, "POST", "/generate", second)
    check(st == 400, "a second request with the running rid: %d %r" % (st, b[:200]))
    check(error_of(b)["param"] == "rid", "names rid: %r" % b)
    st, _, b = request(srv.port, "POST", "/abort_request", '{"rid":"dup"}')
    check(st == 200 and json.loads(b)["aborted"] == 1, "abort by rid: %d %r" % (st, b))
    st, _, b = read_response(first)
    first.close()
    check(st == 200 and b'"abort"' in b, "the first stream ends aborted: %r" % b[-300:])
    wait_for(lambda: metric(srv, "mxserve:num_requests_running") == 0, "nothing left running")


def item09_pipelining(srv):
    # Three requests in one write; the answers come in order on the same connection.
    s = connect(srv.port)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
              b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n"
              b'{"prompt":"1+1"}' + b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    got = []
    for _ in range(3):
        st, _, b = read_response(s)
        got.append((st, b[:12]))
    s.close()
    check([g[0] for g in got] == [200, 200, 200], "three pipelined requests: %r" % got)
    check(got[1][1].startswith(b'{"tokens"') and got[2][1].startswith(b'{"object"'),
          "answered in order: %r" % got)


def item10_no_early_200(srv):
    body = json.dumps({"prompt": "1", "max_tokens": 300, "ignore_eos": True,
                       "temperature": 0}).encode()
    st, h, b = raw(srv.port, ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                              "application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                              % len(body)).encode() + body)
    check(st == 200, "status %d" % st)
    check("content-length" in h, "a non-streamed response has a Content-Length: %r" % h)
    check(b[:1] == b"{", "no heartbeat bytes before the JSON: %r" % b[:20])
    # A request whose context check fails after parsing still gets its real status.
    st, _, b = request(srv.port, "POST", "/v1/completions",
                       '{"prompt":"1","max_tokens":100000000}')
    check(st == 400, "an invalid request is not a 200: %d" % st)


def item11_no_content_type(srv):
    body = json.dumps({"prompt": "1+1=" * 2400})
    check(len(body) > 9000, "the body is over 9 KB")
    st, _, b = request(srv.port, "POST", "/tokenize", body,
                       {"Content-Type": "application/x-www-form-urlencoded"})
    check(st == 200, "a 9.6 KB JSON body sent as a form: %d %r" % (st, b[:200]))
    st, _, b = raw(srv.port, ("POST /tokenize HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                              "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
    check(st == 200, "with no Content-Type at all: %d %r" % (st, b[:200]))


def item12_http10_stream(srv):
    body = json.dumps({"prompt": "1+1=", "max_tokens": 8, "stream": True,
                       "temperature": 0}).encode()
    st, h, b = raw(srv.port, ("POST /v1/completions HTTP/1.0\r\nContent-Type: application/json"
                              "\r\nContent-Length: %d\r\n\r\n" % len(body)).encode() + body)
    check(st == 200, "status %d" % st)
    check("chunked" not in h.get("transfer-encoding", ""), "HTTP/1.0 gets no chunked: %r" % h)
    check(b.rstrip().endswith(b"data: [DONE]"), "the raw stream ends with [DONE]: %r" % b[-80:])


def item13_content_length(srv):
    for name, cls in (("two different", ["5", "7"]), ("negative", ["-1"]),
                      ("2^64", [str(2 ** 64)]), ("not a number", ["12abc"])):
        head = "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        head += "".join("Content-Length: %s\r\n" % c for c in cls) + "\r\n"
        s = connect(srv.port)
        s.sendall(head.encode() + b'{"prompt":"1"}')
        st, h, b = read_response(s)
        check(st == 400, "Content-Length %s: %d %r" % (name, st, b[:200]))
        check(h.get("connection") == "close", "and the connection closes: %r" % h)
        s.close()
    healthy(srv)


def item14_api_key_sources(_):
    key = "k3y-" + os.urandom(6).hex()
    with tempfile.NamedTemporaryFile("w", suffix=".key") as f:
        f.write(key + "\n")
        f.flush()
        for how, flags, env in (("MXSERVE_API_KEY", (), {"MXSERVE_API_KEY": key}),
                                ("--api-key-file", ("--api-key-file", f.name), {})):
            srv = Server(flags=flags, env=env)
            try:
                body = '{"prompt":"1"}'
                st, _, _ = request(srv.port, "POST", "/tokenize", body)
                check(st == 401, "%s: no key: %d" % (how, st))
                st, _, _ = request(srv.port, "POST", "/tokenize", body,
                                   {"Authorization": "Bearer " + key[:-1] + "x"})
                check(st == 401, "%s: a wrong key of the same length: %d" % (how, st))
                st, _, _ = request(srv.port, "POST", "/tokenize", body,
                                   {"Authorization": "Bearer " + key})
                check(st == 200, "%s: the key: %d" % (how, st))
                st, _, _ = request(srv.port, "POST", "/tokenize", body, {"x-api-key": key})
                check(st == 200, "%s: the key as x-api-key: %d" % (how, st))
                st, _, b = request(srv.port, "POST", "/v1/messages/count_tokens", body,
                                   {"x-api-key": key[:-1] + "x"})
                check(st == 401 and anthropic_error_of(b)["type"] == "authentication_error",
                      "%s: a wrong x-api-key: %d %r" % (how, st, b[:200]))
                ps = open("/proc/%d/cmdline" % srv.proc.pid, "rb").read()
                check(key.encode() not in ps, "%s: the key is not on the command line" % how)
            finally:
                srv.stop()


def item15_seed(srv):
    def complete(extra):
        body = json.dumps({"prompt": "1+", "max_tokens": 16, "temperature": 5.0,
                           "ignore_eos": True, **extra})
        st, _, b = request(srv.port, "POST", "/v1/completions", body)
        check(st == 200, "status %d %r" % (st, b[:200]))
        return json.loads(b)["choices"][0]["text"]

    a, b = complete({}), complete({})
    check(a != b, "two requests without a seed at temperature 5 differ: %r == %r" % (a, b))
    a, b = complete({"seed": 7}), complete({"seed": 7})
    check(a == b, "the same seed reproduces: %r != %r" % (a, b))


def anthropic_error_of(body):
    j = json.loads(body)
    check(j.get("type") == "error" and "type" in j.get("error", {}) and "message" in j["error"],
          "not an Anthropic error body: %r" % body[:300])
    return j["error"]


def item16_messages_malformed(srv):
    """/v1/messages: wrong block types, missing fields, huge inputs and depth answer 4xx in
    Anthropic's error shape; the server keeps serving."""
    msgs = [{"role": "user", "content": "1+1="}]
    cases = [
        ("{", 400, "invalid_request_error"),
        ("[1]", 400, "invalid_request_error"),
        (json.dumps({"messages": msgs}), 400, "max_tokens"),
        (json.dumps({"max_tokens": 4}), 400, "messages"),
        (json.dumps({"max_tokens": 4, "messages": "hi"}), 400, "messages"),
        (json.dumps({"max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "data": "AA"}}]}]}), 400, "image"),
        (json.dumps({"max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "tool_result"}]}]}), 400, "tool_use_id"),
        (json.dumps({"max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": 7}]}]}), 400, "type"),
        (json.dumps({"max_tokens": 4, "messages": msgs,
                     "tools": [{"type": "bash_20250124", "name": "bash"}]}), 400, "bash"),
        (json.dumps({"max_tokens": 4, "messages": msgs, "stop_sequences": ["x"] * 1000}),
         400, "stop_sequences"),
        (json.dumps({"max_tokens": 10 ** 12, "messages": msgs}), 400, "max_tokens"),
        (json.dumps({"max_tokens": 4, "model": "nope", "messages": msgs}), 404, "not_found"),
        ('{"max_tokens":4,"messages":' + "[" * 60000 + "]" * 60000 + "}", 400, "256"),
        (json.dumps({"max_tokens": 4, "messages": [{"role": "user", "content": "1" * 200000}]}),
         413, "request_too_large"),
    ]
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        for body, status, says in cases:
            if path.endswith("count_tokens") and says == "max_tokens":
                continue
            st, _, b = request(srv.port, "POST", path, body)
            check(st == status, "%s %r: %d %r" % (path, body[:80], st, b[:200]))
            e = anthropic_error_of(b)
            check(says in e["type"] + " " + e["message"],
                  "%s %r: the error says %r: %r" % (path, body[:80], says, e))
    st, _, b = request(srv.port, "POST", "/v1/messages/count_tokens",
                       json.dumps({"messages": msgs}))
    check(st == 200 and json.loads(b)["input_tokens"] > 0, "count_tokens: %d %r" % (st, b))
    healthy(srv)


def item17_responses_malformed(srv):
    """/v1/responses: wrong item types, missing fields, huge inputs and unknown ids answer 4xx in
    OpenAI's error shape (a 404 naming an unknown id); the server keeps serving."""
    cases = [
        ("POST", "/v1/responses", "{", 400, "JSON"),
        ("POST", "/v1/responses", json.dumps({"model": "arith"}), 400, "input"),
        ("POST", "/v1/responses", json.dumps({"input": 7}), 400, "input"),
        ("POST", "/v1/responses", json.dumps({"input": [{"type": "item_reference", "id": "x"}]}),
         400, "item_reference"),
        ("POST", "/v1/responses", json.dumps({"input": [{"role": "user", "content": [
            {"type": "input_file", "file_id": "f"}]}]}), 400, "input_file"),
        ("POST", "/v1/responses", json.dumps({"input": [{"type": "function_call", "call_id": "c",
                                                         "name": "f", "arguments": "[1"}]}),
         400, "arguments"),
        ("POST", "/v1/responses", json.dumps({"input": [{"type": "function_call_output"}]}),
         400, "call_id"),
        ("POST", "/v1/responses", json.dumps({"input": "1", "tools": [{"type": "file_search"}]}),
         400, "file_search"),
        ("POST", "/v1/responses", json.dumps({"input": "1", "text": {"format": {"type": "xml"}}}),
         400, "text.format"),
        ("POST", "/v1/responses", json.dumps({"input": "1", "reasoning": {"effort": "max"}}),
         400, "effort"),
        ("POST", "/v1/responses", json.dumps({"input": "1", "store": "yes"}), 400, "store"),
        ("POST", "/v1/responses", json.dumps({"input": "1", "max_output_tokens": 10 ** 12}),
         400, "max_output_tokens"),
        ("POST", "/v1/responses", json.dumps({"input": "1", "previous_response_id": "resp_nope"}),
         404, "resp_nope"),
        ("POST", "/v1/responses", json.dumps({"input": "1" * 200000}), 413, "150000"),
        ("POST", "/v1/responses", '{"input":' + "[" * 60000 + "]" * 60000 + "}", 400, "256"),
        ("GET", "/v1/responses/resp_missing", None, 404, "resp_missing"),
        ("GET", "/v1/responses/resp_missing/input_items", None, 404, "resp_missing"),
        ("DELETE", "/v1/responses/resp_missing", None, 404, "resp_missing"),
        ("GET", "/v1/responses/", None, 404, "no route"),
    ]
    for method, path, body, status, says in cases:
        st, _, b = request(srv.port, method, path, body)
        check(st == status, "%s %s %r: %d %r" % (method, path, (body or "")[:80], st, b[:200]))
        e = error_of(b)
        check(says in e["message"] + " " + str(e.get("param")),
              "%s %r: the error says %r: %r" % (path, (body or "")[:80], says, e))
    st, _, b = request(srv.port, "POST", "/v1/responses",
                       json.dumps({"input": "1+1=", "max_output_tokens": 2}))
    check(st == 200, "a good request after the bad ones: %d %r" % (st, b[:200]))
    rid = json.loads(b)["id"]
    for query in ("?limit=0", "?limit=x", "?order=up", "?after=nope"):
        st, _, b = request(srv.port, "GET", "/v1/responses/%s/input_items%s" % (rid, query))
        check(st == 400, "input_items%s: %d %r" % (query, st, b[:200]))
    healthy(srv)


ITEMS = {
    "01": (item01_deep_json, [], []),
    "02": (item02_slowloris_and_idle, ["--http-threads", "16"], ["--http-head-timeout", "2"]),
    "03": (item03_decompression_bomb, [], []),
    "04": (item04_chunked_and_header_limits, ["--max-request-bytes", "1000000"], []),
    "05": (item05_disconnect_aborts_every_mode, [], []),
    "06": (item06_flush_cache_without_body, [], []),
    "07": (item07_abort_all_wrong_type, [], []),
    "08": (item08_duplicate_rid, [], []),
    "09": (item09_pipelining, [], []),
    "10": (item10_no_early_200, [], []),
    "11": (item11_no_content_type, [], []),
    "12": (item12_http10_stream, [], []),
    "13": (item13_content_length, [], []),
    "14": (item14_api_key_sources, None, None),
    "15": (item15_seed, [], []),
    "16": (item16_messages_malformed, ["--max-request-bytes", "150000"], []),
    "17": (item17_responses_malformed, ["--max-request-bytes", "150000"], []),
}


def main():
    fn, flags, new_flags = ITEMS[ITEM[:2]]
    t0 = time.time()
    srv = None
    try:
        if flags is not None:
            srv = Server(flags=flags, new_flags=new_flags)
        fn(srv)
    except (Fail, OSError, ValueError, KeyError) as e:
        print("FAIL item %s (%s): %s: %s" % (ITEM, fn.__name__, type(e).__name__, e))
        if srv is not None:
            srv.log.seek(0)
            print("server log (tail):\n" + srv.log.read()[-3000:])
        return 1
    finally:
        if srv is not None:
            srv.stop()
    print("ok item %s (%s) in %.1f s" % (ITEM, fn.__name__, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
