#!/usr/bin/env python3
"""A hostile (or merely unusual) OCI registry on 127.0.0.1, for credential-scoping
and size-cap tests (stdlib only).

Two listeners: the registry itself and a "foreign" origin (another port) that
records every request it gets, with its Authorization header, as one JSON line
in --log ({"origin": "registry"|"foreign", "method", "path", "authorization"}).

The registry wants credentials (--user, --password) on everything but /v2/:
  --challenge basic      401 with Basic (the default)
  --challenge http-realm 401 with a Bearer challenge whose realm is plain http on
                         the foreign origin (whose /token hands out "good-token",
                         which the registry accepts)
It sends blob uploads to the foreign origin (the POST's Location), which takes
PATCH and PUT without credentials, and redirects blob GETs there (307), as
registries that keep blobs in object storage do. With --foreign-401 the
foreign origin answers blob GETs with a 401 of its own (a Bearer challenge
whose realm is the foreign /token). --echo-auth makes a manifest PUT fail with
a 403 whose error message quotes the Authorization header it got. A manifest
named "huge" is a 1 GiB body, streamed (no Content-Length) until the client
hangs up; the bytes sent are logged ({"huge_sent": N}). With --tags-next-foreign,
a tag list's first page (one tag) links its next page to the foreign origin,
whose answer lists a tag the registry does not have.
"""
import argparse, base64, hashlib, json, threading, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

p = argparse.ArgumentParser()
p.add_argument("--port-file", required=True)
p.add_argument("--log", required=True)
p.add_argument("--user", required=True)
p.add_argument("--password", required=True)
p.add_argument("--challenge", choices=["basic", "http-realm"], default="basic")
p.add_argument("--foreign-401", action="store_true")
p.add_argument("--echo-auth", action="store_true")
p.add_argument("--tags-next-foreign", action="store_true")
a = p.parse_args()

lock = threading.Lock()
blobs, manifests, uploads = {}, {}, {}
ports = {}
BASIC = "Basic " + base64.b64encode(f"{a.user}:{a.password}".encode()).decode()


def log(**kw):
    with lock, open(a.log, "a") as f:
        f.write(json.dumps(kw) + "\n")


class Base(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    origin = "?"

    def log_message(self, *args):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def answer(self, status, body=b"", headers=None, ctype="application/json"):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if body or status not in (204, 304):
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def record(self):
        log(origin=self.origin, method=self.command, path=self.path,
            authorization=self.headers.get("Authorization"))

    def do_GET(self):
        self.record()
        self.route()

    do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = do_GET


def reg_url(path):
    return f"http://127.0.0.1:{ports['registry']}{path}"


def foreign_url(path):
    return f"http://127.0.0.1:{ports['foreign']}{path}"


class Registry(Base):
    origin = "registry"

    def authorized(self):
        got = self.headers.get("Authorization")
        return got == BASIC if a.challenge == "basic" else got == "Bearer good-token"

    def challenge(self):
        if a.challenge == "basic":
            return 'Basic realm="hostile"'
        return f'Bearer realm="{foreign_url("/token")}",service="hostile"'

    def route(self):
        path = self.path.split("?")[0]
        body = self.body()
        if path == "/v2/":
            return self.answer(401, b"{}", {"WWW-Authenticate": self.challenge()})
        if not self.authorized():
            return self.answer(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}',
                               {"WWW-Authenticate": self.challenge()})
        parts = path.split("/")
        if path.endswith("/tags/list") and a.tags_next_foreign:
            tags = sorted(k for k in manifests if not k.startswith("sha256:"))
            return self.answer(200, json.dumps({"name": "/".join(parts[2:-2]), "tags": tags[:1]}).encode(),
                               {"Link": f'<{foreign_url(path)}?n=1&last={tags[0] if tags else ""}>; rel="next"'})
        if "/blobs/uploads/" in path and self.command == "POST":
            u = str(uuid.uuid4())
            uploads[u] = b""
            return self.answer(202, b"", {"Location": foreign_url("/upload/" + u), "Range": "0-0"})
        if "/blobs/" in path:
            d = parts[-1]
            if d not in blobs:
                return self.answer(404, b'{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown"}]}')
            if self.command == "HEAD":
                return self.answer(200, b"", {"Docker-Content-Digest": d, "Content-Length": str(len(blobs[d]))})
            return self.answer(307, b"", {"Location": foreign_url("/blob/" + d)})
        if "/manifests/" in path:
            ref = parts[-1]
            if self.command == "PUT":
                if a.echo_auth:
                    msg = "denied for " + str(self.headers.get("Authorization"))
                    return self.answer(403, json.dumps({"errors": [{"code": "DENIED", "message": msg}]}).encode())
                d = "sha256:" + hashlib.sha256(body).hexdigest()
                manifests[ref] = manifests[d] = (body, self.headers.get("Content-Type"))
                return self.answer(201, b"", {"Docker-Content-Digest": d, "Location": reg_url(path)})
            if ref == "huge":
                return self.huge()
            if ref not in manifests:
                return self.answer(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}')
            m, ctype = manifests[ref]
            d = "sha256:" + hashlib.sha256(m).hexdigest()
            return self.answer(200, m, {"Docker-Content-Digest": d}, ctype)
        return self.answer(404, b"{}")

    def huge(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        self.send_header("Connection", "close")
        self.end_headers()
        sent = 0
        chunk = b"a" * (1 << 20)
        try:
            self.wfile.write(b'{"schemaVersion":2,"padding":"')
            while sent < (1 << 30):
                self.wfile.write(chunk)
                sent += len(chunk)
            self.wfile.write(b'"}')
        except (BrokenPipeError, ConnectionResetError):
            pass
        log(huge_sent=sent)
        self.close_connection = True


class Foreign(Base):
    origin = "foreign"

    def route(self):
        path = self.path.split("?")[0]
        body = self.body()
        if path == "/token":
            return self.answer(200, json.dumps({"token": "good-token", "expires_in": 300}).encode())
        if path.startswith("/upload/"):
            u = path.split("/")[-1]
            if u not in uploads:
                return self.answer(404, b"{}")
            uploads[u] += body
            if self.command == "PATCH":
                return self.answer(202, b"", {"Location": foreign_url(path), "Range": f"0-{len(uploads[u]) - 1}"})
            if self.command == "PUT":
                d = self.path.split("digest=")[-1].split("&")[0].replace("%3A", ":")
                blobs[d] = uploads.pop(u)
                return self.answer(201, b"", {"Docker-Content-Digest": d, "Location": reg_url("/v2/x/blobs/" + d)})
            if self.command == "GET":
                return self.answer(204, b"", {"Location": foreign_url(path), "Range": f"0-{max(len(uploads[u]) - 1, 0)}"})
        if path.endswith("/tags/list"):
            return self.answer(200, json.dumps({"name": "x", "tags": ["buildcache--0000000000000000"]}).encode())
        if path.startswith("/blob/"):
            if a.foreign_401:
                return self.answer(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"who are you"}]}',
                                   {"WWW-Authenticate": f'Bearer realm="{foreign_url("/token")}",service="foreign"'})
            d = path.split("/")[-1]
            if d not in blobs:
                return self.answer(404, b"{}")
            return self.answer(200, blobs[d], {}, "application/octet-stream")
        return self.answer(404, b"{}")


servers = {name: ThreadingHTTPServer(("127.0.0.1", 0), cls) for name, cls in
           (("registry", Registry), ("foreign", Foreign))}
for name, s in servers.items():
    ports[name] = s.server_address[1]
    if name == "foreign":
        threading.Thread(target=s.serve_forever, daemon=True).start()
with open(a.port_file + ".tmp", "w") as f:
    f.write(f"{ports['registry']} {ports['foreign']}\n")
import os
os.rename(a.port_file + ".tmp", a.port_file)
servers["registry"].serve_forever()
