#!/usr/bin/env python3
"""Servers for the network tests, on 127.0.0.1, each writing its port to PORT_FILE.

  net_servers.py login DIR PORT_FILE USER:PASSWORD
      serves DIR's files only to requests with that HTTP basic login (401 otherwise)
  net_servers.py proxy PORT_FILE LOG
      a forward HTTP proxy: fetches the absolute URL a request names (passing
      Range on) and appends the URL to LOG, a line each
"""
import base64
import functools
import http.server
import sys
import urllib.error
import urllib.request


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


class Login(Quiet):
    want = ""

    def send_head(self):
        if self.headers.get("Authorization", "") != "Basic " + self.want:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="fixture"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return super().send_head()


class Proxy(http.server.BaseHTTPRequestHandler):
    log = ""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def log_message(self, *a):
        pass

    def do_GET(self):
        with open(self.log, "a") as f:
            f.write(self.path + "\n")
        req = urllib.request.Request(self.path)
        if self.headers.get("Range"):
            req.add_header("Range", self.headers["Range"])
        try:
            r = self.direct.open(req, timeout=30)
            status, body, headers = r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            status, body, headers = e.code, e.read(), e.headers
        self.send_response(status)
        for k in ("Content-Range", "Last-Modified"):
            if headers.get(k):
                self.send_header(k, headers[k])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    mode = sys.argv[1]
    if mode == "login":
        Login.want = base64.b64encode(sys.argv[4].encode()).decode()
        handler = functools.partial(Login, directory=sys.argv[2])
        port_file = sys.argv[3]
    else:
        Proxy.log = sys.argv[3]
        handler = Proxy
        port_file = sys.argv[2]
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    with open(port_file, "w") as f:
        f.write(str(s.server_address[1]))
    s.serve_forever()


if __name__ == "__main__":
    main()
