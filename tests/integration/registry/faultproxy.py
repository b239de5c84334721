#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy for the registry tests (stdlib only).

Sits between stackbuild and a registry on 127.0.0.1 and, on a share of the
requests (decided by a seeded RNG in arrival order, so a run is repeatable),
answers 500, answers 429 with Retry-After, or cuts the connection in the middle
of a request body of at least --cut-min bytes. Every request is logged as one
JSON line: method, path, fault, body bytes forwarded to the registry, status.

Cut modes: "buffer" (the default) reads part of the body and drops the client
without forwarding anything, as a buffering front proxy (nginx's default
proxy_request_buffering) does when a client's link breaks; "stream" forwards
what it read to the registry first, as a plain TCP path would.

Faults are bounded: at most --max-faults in all, and never more than
--max-in-a-row on the same method and path, so every client that retries
a few times gets through.
"""
import argparse, json, random, socket, socketserver, sys, threading

p = argparse.ArgumentParser()
p.add_argument("--upstream", required=True)          # host:port
p.add_argument("--port-file", required=True)
p.add_argument("--log", required=True)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--rate", type=float, default=0.3)    # share of requests that get a fault
p.add_argument("--cut-min", type=int, default=1 << 20)
p.add_argument("--cut-mode", choices=["buffer", "stream"], default="buffer")
p.add_argument("--max-faults", type=int, default=60)
p.add_argument("--max-in-a-row", type=int, default=2)
args = p.parse_args()
UP_HOST, UP_PORT = args.upstream.rsplit(":", 1)

lock = threading.Lock()
rng = random.Random(args.seed)
state = {"faults": 0, "row": {}}
logf = open(args.log, "a", buffering=1)


def decide(method, path, body_len):
    key = method + " " + path.split("?")[0]
    with lock:
        r = rng.random()
        kind = rng.random()
        frac = rng.uniform(0.1, 0.9)
        if state["faults"] >= args.max_faults or state["row"].get(key, 0) >= args.max_in_a_row or r >= args.rate:
            state["row"][key] = 0
            return None, frac
        state["faults"] += 1
        state["row"][key] = state["row"].get(key, 0) + 1
        if body_len >= args.cut_min and kind < 0.5:
            return "cut", frac
        return ("500" if kind < 0.5 or kind >= 0.75 and body_len < args.cut_min else "429"), frac


def log(**kw):
    logf.write(json.dumps(kw) + "\n")


def read_head(f):
    lines = []
    while True:
        line = f.readline(65537)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line.decode("latin-1").rstrip("\r\n"))


def headers_of(lines):
    h = {}
    for l in lines[1:]:
        if ":" in l:
            k, v = l.split(":", 1)
            h[k.strip().lower()] = v.strip()
    return h


def relay(src, dst, n):
    sent = 0
    while sent < n:
        chunk = src.read(min(1 << 16, n - sent))
        if not chunk:
            break
        if dst is not None:
            (dst.sendall if hasattr(dst, "sendall") else dst.write)(chunk)
        sent += len(chunk)
    return sent


class Handler(socketserver.StreamRequestHandler):
    def answer(self, status, body, extra=""):
        data = body.encode()
        self.wfile.write((f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                          f"Connection: close\r\n{extra}\r\n").encode() + data)

    def handle(self):
        first = self.connection.recv(1, socket.MSG_PEEK)
        if first == b"\x16":  # a TLS ClientHello: this proxy speaks plain HTTP only
            self.wfile.write(b"HTTP/1.1 400 X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        while True:
            head = read_head(self.rfile)
            if not head:
                return
            method, path = head[0].split(" ")[:2]
            h = headers_of(head)
            n = int(h.get("content-length", "0"))
            fault, frac = decide(method, path, n)
            if fault == "cut":
                part = int(n * frac)
                fwd = 0
                if args.cut_mode == "stream":
                    up = socket.create_connection((UP_HOST, int(UP_PORT)))
                    up.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
                    fwd = relay(self.rfile, up, part)
                    up.close()
                else:
                    relay(self.rfile, None, part)
                log(method=method, path=path, fault="cut", length=n, read=part, forwarded=fwd, status=0)
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if fault in ("500", "429"):
                relay(self.rfile, None, n)
                if fault == "500":
                    self.answer(500, '{"errors":[{"code":"UNKNOWN","message":"injected failure"}]}')
                else:
                    self.answer(429, '{"errors":[{"code":"TOOMANYREQUESTS","message":"injected"}]}', "Retry-After: 1\r\n")
                log(method=method, path=path, fault=fault, length=n, forwarded=0, status=int(fault))
                return
            up = socket.create_connection((UP_HOST, int(UP_PORT)))
            out = [l for l in head if not l.lower().startswith("connection:")] + ["Connection: close"]
            up.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
            fwd = relay(self.rfile, up, n)
            uf = up.makefile("rb")
            rhead = read_head(uf)
            if rhead is None:
                up.close()
                return
            status = int(rhead[0].split(" ")[1])
            rh = headers_of(rhead)
            self.wfile.write(("\r\n".join(rhead) + "\r\n\r\n").encode("latin-1"))
            keep = True
            if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
                pass
            elif "content-length" in rh:
                relay(uf, self.wfile, int(rh["content-length"]))
            else:  # chunked or until close: pass it all on, then close
                while True:
                    chunk = uf.read1(1 << 16)
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                keep = False
            self.wfile.flush()
            up.close()
            log(method=method, path=path, fault=None, length=n, forwarded=fwd, status=status)
            if not keep:
                return


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = Server(("127.0.0.1", 0), Handler)
with open(args.port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(args.port_file + ".tmp", args.port_file)
srv.serve_forever()
