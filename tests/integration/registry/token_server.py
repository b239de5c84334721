#!/usr/bin/env python3
"""A small bearer-token server for the registry tests (distribution's `auth: token`).

Checks Basic credentials, grants every scope asked for, and signs an RS256 JWT
whose x5c header carries the certificate the registry trusts (rootcertbundle).
Tokens expire after --ttl seconds while the answer says --advertise seconds, so
a client must handle a token that the registry refuses before the client
expected it to (a 401 mid-push). With --refresh-token it also answers
distribution's OAuth2 POST (grant_type=refresh_token), as registries that hand
out identity tokens do. Every issue is logged as a JSON line.
"""
import argparse, base64, json, os, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse, parse_qs

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

p = argparse.ArgumentParser()
p.add_argument("--port-file", required=True)
p.add_argument("--key", required=True)
p.add_argument("--cert", required=True)
p.add_argument("--issuer", default="stackbuild-test-issuer")
p.add_argument("--service", default="stackbuild-test-registry")
p.add_argument("--user", required=True)
p.add_argument("--password", required=True)
p.add_argument("--ttl", type=float, default=3)          # how long the registry accepts a token
p.add_argument("--advertise", type=int, default=300)    # expires_in in the answer
p.add_argument("--leeway", type=int, default=60)        # distribution's clock-skew leeway
p.add_argument("--log", required=True)
p.add_argument("--refresh-token")                        # accepted by POST; none: POST is refused
a = p.parse_args()

key = serialization.load_pem_private_key(open(a.key, "rb").read(), password=None)
cert = x509.load_pem_x509_certificate(open(a.cert, "rb").read())
x5c = base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()


def b64(d):
    return base64.urlsafe_b64encode(d).rstrip(b"=").decode()


def token(access):
    now = time.time()
    header = {"typ": "JWT", "alg": "RS256", "x5c": [x5c]}
    claims = {"iss": a.issuer, "sub": a.user, "aud": a.service, "iat": int(now), "jti": str(uuid.uuid4()),
              "nbf": int(now) - 1, "exp": int(now + a.ttl) - a.leeway, "access": access}
    signing = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
    sig = key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
    return signing + "." + b64(sig)


class H(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send_json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        q = parse_qs(urlparse(self.path).query)
        auth = self.headers.get("Authorization", "")
        user = None
        if auth.startswith("Basic "):
            u, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
            if u != a.user or pw != a.password:
                with open(a.log, "a") as f:
                    f.write(json.dumps({"event": "refused"}) + "\n")
                return self.send_json(401, {"errors": [{"code": "UNAUTHORIZED", "message": "invalid username or password"}]})
            user = u
        access = []
        for s in q.get("scope", []):
            parts = s.split(":")
            if len(parts) == 3 and user:
                access.append({"type": parts[0], "name": parts[1], "actions": parts[2].split(",")})
        with open(a.log, "a") as f:
            f.write(json.dumps({"event": "token", "user": user, "scopes": q.get("scope", [])}) + "\n")
        self.send_json(200, {"token": token(access), "expires_in": a.advertise,
                             "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


    def do_POST(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":  # Go's client may send the form so
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                body += self.rfile.read(size)
                self.rfile.readline()
                if size == 0:
                    break
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        form = parse_qs(body.decode())
        get = lambda k: (form.get(k) or [""])[0]
        if not a.refresh_token:
            return self.send_json(404, {"errors": [{"code": "UNSUPPORTED", "message": "no OAuth2 here"}]})
        if get("grant_type") != "refresh_token" or get("refresh_token") != a.refresh_token:
            with open(a.log, "a") as f:
                f.write(json.dumps({"event": "refused", "grant_type": get("grant_type"),
                                    "headers": dict(self.headers), "fields": sorted(form)}) + "\n")
            return self.send_json(401, {"errors": [{"code": "UNAUTHORIZED", "message": "invalid refresh token"}]})
        scopes = [x for v in form.get("scope", []) for x in v.split()]  # docker: one field; containers/image: several
        access = []
        for s in scopes:
            parts = s.split(":")
            if len(parts) == 3:
                access.append({"type": parts[0], "name": parts[1], "actions": parts[2].split(",")})
        with open(a.log, "a") as f:
            f.write(json.dumps({"event": "oauth", "client_id": get("client_id"), "service": get("service"),
                                "scopes": scopes}) + "\n")
        self.send_json(200, {"access_token": token(access), "expires_in": a.advertise, "refresh_token": a.refresh_token})


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(a.port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(a.port_file + ".tmp", a.port_file)
srv.serve_forever()
