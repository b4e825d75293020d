#!/usr/bin/env python3
"""The figures of issue 26 for docs/reliability.md (not a test: it prints measurements).

Usage: measure.py MXSERVE_BIN MODEL_DIR [--slow 2000] [--idle 10000]

Starts `mxserve serve` (per-client connection limit raised so that every attack connection is
held open), then: slowloris + idle connections open at once while a normal client asks
/health and a chat completion; then the bombs (JSON nested 10^6 deep, a 1 GB declared body,
gzip and brotli bodies, 10^5 headers), each with its status and the server's RSS growth.
"""
import argparse
import gzip
import json
import re
import resource
import socket
import subprocess
import tempfile
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("bin")
ap.add_argument("model")
ap.add_argument("--slow", type=int, default=2000)
ap.add_argument("--idle", type=int, default=10000)
args = ap.parse_args()

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

log = tempfile.NamedTemporaryFile("w+", suffix=".log")
proc = subprocess.Popen([args.bin, "serve", args.model, "--host", "127.0.0.1", "--port", "0",
                         "--threads", "1", "--max-connections", "20000",
                         "--max-connections-per-client", "20000",
                         "--keep-alive-timeout", "120", "--http-head-timeout", "120"],
                        stdout=log, stderr=subprocess.STDOUT)
port = None
for _ in range(600):
    log.seek(0)
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", log.read())
    if m:
        port = int(m.group(1))
        break
    time.sleep(0.1)
assert port, "no listening line"


def rss_mb():
    for line in open("/proc/%d/status" % proc.pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def exchange(data, timeout=30):
    """Sends raw bytes, returns (status, seconds to the status line)."""
    t0 = time.time()
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except OSError:
            pass
        buf = b""
        while b"\r\n" not in buf:
            c = s.recv(65536)
            if not c:
                return None, time.time() - t0
            buf += c
        return int(buf.split()[1]), time.time() - t0
    finally:
        s.close()


def get(path):
    return exchange(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())


def post(path, body, extra=""):
    return exchange(("POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: "
                     "application/json\r\nContent-Length: %d\r\n%s\r\n" %
                     (path, len(body), extra)).encode() + body)


for _ in range(1200):
    if get("/health")[0] == 200:
        break
    time.sleep(0.1)
print("ready; RSS %.0f MB" % rss_mb())

# ---- slowloris + idle ----
slow, idle = [], []
stop = threading.Event()
for i in range(args.slow):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    slow.append(s)
for i in range(args.idle):
    idle.append(socket.create_connection(("127.0.0.1", port)))


def drip():  # one byte per connection every 3 s, as the slowloris does
    while not stop.wait(3.0):
        for s in slow:
            try:
                s.send(b"X")
            except OSError:
                pass


threading.Thread(target=drip, daemon=True).start()
time.sleep(1.0)
lat = []
for _ in range(5):
    st, t = get("/health")
    lat.append((st, t))
chat = json.dumps({"messages": [{"role": "user", "content": "1+1="}], "max_tokens": 8,
                   "temperature": 0}).encode()
cst, ct = post("/v1/chat/completions", chat)
print("%d slowloris + %d idle connections open: /health %s; chat %s in %.2f s; RSS %.0f MB" %
      (args.slow, args.idle, ", ".join("%s in %.3f s" % x for x in lat), cst, ct, rss_mb()))
stop.set()
for s in slow + idle:
    s.close()
time.sleep(1.0)
print("after closing them: /health %s in %.3f s; RSS %.0f MB" % (*get("/health"), rss_mb()))

# ---- 200 clients killed after 1 s ----
def metric(name):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    buf = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        buf += c
    s.close()
    m = re.search(re.escape(name) + r'\{model="[^"]*"\} (\S+)', buf.decode())
    return float(m.group(1)) if m else None


pages0 = metric("mxserve:kv_pages_used")
clients = []
for i in range(200):
    body = json.dumps({"messages": [{"role": "user", "content": "%d+%d=" % (i, i)}],
                       "max_tokens": 4000, "ignore_eos": True, "stream": i % 2 == 0}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
               "application/json\r\nAccept-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"
               % len(body)).encode() + body)
    clients.append(s)
time.sleep(1.0)
running = metric("mxserve:num_requests_running")
for s in clients:
    s.close()
t0 = time.time()
while time.time() - t0 < 30 and (metric("mxserve:num_requests_running") or 0) > 0:
    time.sleep(0.05)
print("200 clients (half streaming, all Accept-Encoding: gzip) killed after 1 s: %s running at "
      "the kill, 0 running %.2f s later; %s disconnects counted; KV pages used %s -> %s" %
      (running, time.time() - t0, metric("mxserve:client_disconnects_total"), pages0,
       metric("mxserve:kv_pages_used")))

# ---- bombs ----
def bomb(name, fn):
    before = rss_mb()
    st, t = fn()
    print("%-40s -> %s in %.2f s; RSS %.0f -> %.0f MB" % (name, st, t, before, rss_mb()))


d = 10 ** 6
deep = ('{"x":' + "[" * d + "]" * d + ',"y":1}').encode()
bomb("JSON nested 10^6 deep (/tokenize)", lambda: post("/tokenize", deep))
bomb("declared 1 GB body (Content-Length)", lambda: exchange(
    b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 1000000000\r\n\r\n" + b"{" * 65536))
gz = gzip.compress(b'{"prompt":"' + b"a" * (400 << 20) + b'"}', 9)
bomb("gzip bomb %d KB -> 400 MB" % (len(gz) >> 10),
     lambda: post("/tokenize", gz, "Content-Encoding: gzip\r\n"))
bomb("brotli body", lambda: post("/tokenize", b"\x1b\xff\xff", "Content-Encoding: br\r\n"))
many = "".join("X-H%d: v\r\n" % i for i in range(10 ** 5)).encode()
bomb("10^5 headers", lambda: exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n"))
print("after the bombs: /health %s in %.3f s; RSS %.0f MB" % (*get("/health"), rss_mb()))
proc.terminate()
proc.wait()
