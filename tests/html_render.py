#!/usr/bin/python3
"""Renders an fp4emu --report page in headless Chromium and checks it.

Drives Chromium through the DevTools protocol (a WebSocket; Python standard
library only) and fails when the page logs a console error or warning, throws,
violates its Content-Security-Policy, tries to load anything, shows an image
that did not decode, holds an element no fp4emu page writes (a script or
image that escaped from the data), or when its tables do not sort.

  html_render.py [--chromium PATH] [--screenshot OUT.png] PAGE.html

Prints one line per problem and exits 1 when there is any; exit 0 otherwise.
"""
import argparse
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


class WebSocket:
    """The client side of RFC 6455, enough for DevTools: text frames, masked."""

    def __init__(self, url, timeout):
        assert url.startswith("ws://")
        hostport, _, path = url[len("ws://"):].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise RuntimeError("DevTools closed the connection during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"DevTools refused the WebSocket: {head!r}")

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise RuntimeError("DevTools closed the connection")
            data += chunk
        return data

    def send(self, text):
        payload = text.encode()
        head = bytes([0x81])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            data = self._read(n)
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise RuntimeError("DevTools closed the WebSocket")
            if opcode in (0x9, 0xA):  # ping/pong: DevTools sends none; ignore
                continue
            message += data
            if b0 & 0x80:
                return message.decode()


class DevTools:
    def __init__(self, url, timeout):
        self.ws = WebSocket(url, timeout)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method, timeout):
        end = time.time() + timeout
        while time.time() < end:
            for e in self.events:
                if e["method"] == method:
                    return e
            self.events.append(json.loads(self.ws.recv()))
        raise RuntimeError(f"no {method} within {timeout} s")

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluating a check threw: {r['exceptionDetails']}")
        return r["result"].get("value")


# Runs in the page: what it holds, and whether its tables sort.
CHECKS = r"""
(() => {
  const out = {problems: [], tables: 0, sorted: 0, images: 0};
  for (const img of document.images) {
    out.images++;
    if (!img.src.startsWith("data:image/")) out.problems.push("image not from a data: URI: " + img.src.slice(0, 80));
    if (!img.complete || img.naturalWidth === 0) out.problems.push("image did not load: " + img.alt);
  }
  if (document.scripts.length !== 1) out.problems.push(document.scripts.length + " script elements (fp4emu writes 1)");
  for (const el of document.querySelectorAll("*")) {
    for (const attr of el.attributes)
      if (attr.name.startsWith("on")) out.problems.push("event handler attribute " + attr.name + " on " + el.tagName);
    if (["IFRAME", "OBJECT", "EMBED", "LINK", "BASE", "FORM", "INPUT", "SVG", "MATH"].includes(el.tagName.toUpperCase()))
      out.problems.push("unexpected element " + el.tagName);
  }
  if (window.__fp4emu_pwned) out.problems.push("injected script ran");
  const key = (cell) => cell.getAttribute("data-v");
  for (const table of document.querySelectorAll("table.sortable")) {
    out.tables++;
    const rows = () => Array.from(table.tBodies[0].rows);
    if (rows().length < 2) continue;
    const ths = Array.from(table.tHead.rows[0].cells);
    const num = ths.findIndex((th) => th.classList.contains("num"));
    if (num < 0) continue;
    for (const dir of ["ascending", "descending"]) {
      ths[num].click();
      if (ths[num].getAttribute("aria-sort") !== dir) { out.problems.push("header not marked " + dir); break; }
      const vals = rows().map((r) => key(r.cells[num])).filter((v) => v !== null).map(Number);
      const missingLast = rows().map((r) => key(r.cells[num]) === null)
          .every((m, i, a) => !m || a.slice(i).every((x) => x));
      const ok = vals.every((v, i) => i === 0 || (dir === "ascending" ? vals[i - 1] <= v : vals[i - 1] >= v));
      if (!ok || !missingLast) out.problems.push("table " + table.id + " column " + num + " not sorted " + dir);
    }
    out.sorted++;
  }
  return out;
})()
"""


def find_chromium(given):
    for name in [given] if given else ["chromium", "chromium-browser", "google-chrome"]:
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("page")
    ap.add_argument("--chromium")
    ap.add_argument("--screenshot")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    chromium = find_chromium(args.chromium)
    if not chromium:
        print("chromium not found (Debian package chromium; tools/install-deps.sh installs it)")
        return 77
    profile = tempfile.mkdtemp(prefix="fp4emu_chromium_")
    proc = subprocess.Popen([chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                             "--no-default-browser-check", "--disable-extensions", "--remote-debugging-port=0",
                             "--remote-allow-origins=*", f"--user-data-dir={profile}",
                             f"--window-size={args.width},900", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    problems = []
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        end = time.time() + args.timeout
        while not (os.path.exists(port_file) and open(port_file).read().count("\n") >= 1):
            if proc.poll() is not None or time.time() > end:
                print(f"chromium did not start (exit {proc.poll()})")
                return 1
            time.sleep(0.1)
        port = int(open(port_file).read().split("\n")[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=args.timeout) as r:
            pages = [t for t in json.load(r) if t.get("type") == "page"]
        dt = DevTools(pages[0]["webSocketDebuggerUrl"], args.timeout)
        for domain in ("Runtime", "Log", "Page", "Network"):
            dt.call(f"{domain}.enable")
        dt.call("Page.navigate", url="file://" + os.path.abspath(args.page))
        dt.wait_event("Page.loadEventFired", args.timeout)
        if args.screenshot:  # before the checks sort the tables
            size = dt.call("Page.getLayoutMetrics")["cssContentSize"]
            shot = dt.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                           clip={"x": 0, "y": 0, "width": args.width, "height": min(size["height"], 16000),
                                 "scale": 1})
            with open(args.screenshot, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        result = dt.evaluate(CHECKS)
        problems += result["problems"]
        if result["tables"] and not result["sorted"]:
            problems.append("no table could be sorted by a numeric column")
        # Everything logged while loading and sorting, and every request that
        # left the page (data: URIs are not requests).
        for e in dt.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                problems.append("console " + p["type"] + ": " + " ".join(str(a.get("value", a.get("description")))
                                                                        for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                problems.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:300])
            elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                problems.append("log " + p["entry"]["level"] + ": " + p["entry"]["text"][:300])
            elif m == "Network.requestWillBeSent":
                url = p["request"]["url"]
                if not url.startswith("data:") and url != "file://" + os.path.abspath(args.page):
                    problems.append("request for " + url[:120])
        print(f"{args.page}: {result['images']} image(s), {result['tables']} table(s), "
              f"{result['sorted']} sorted both ways, {len(problems)} problem(s)")
        try:
            dt.call("Browser.close")
        except Exception:
            pass
    finally:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    for p in problems:
        print("problem: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
