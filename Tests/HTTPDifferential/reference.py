#!/usr/bin/env python3
"""Reference side of the HTTP/1.1 request-parser differential test.

Runs every corpus case through two independent reference parsers, h11 (0.16)
and llhttp (PyPI `llhttp` 9.3.0.0, strict: every lenient_* flag False), and
writes what each one made of the byte stream.

Usage:
    python3 Tests/HTTPDifferential/reference.py <corpus.json> <results.json>
    python3 Tests/HTTPDifferential/reference.py --self-test

Corpus: JSON array of {"name": str, "bytes": <standard base64>, ...}. Each case
is everything a client sends on one connection, followed by EOF (half-close).

Results: JSON object  name -> {"h11": R, "llhttp": R}  with

  R = {
    "requests": [                     # messages delivered COMPLETELY before any error/stop
      {"method": str, "target": str,
       "version": str,                # "1.1", "1.0", ... as the parser reports it
       "headers": [[name, value], ...],   # in order; value with surrounding SP/HTAB removed
       "trailers": [[name, value], ...],  # chunked trailer fields (extension; [] if none)
       "content_length": int | null,  # Content-Length used for framing; null if the body was
                                      # chunked or there was no Content-Length (empty body)
       "chunked": bool,               # body framed by chunked transfer coding
       "body": <base64>},
    ],
    "error": null | str,     # "<ExceptionClass>: <message>" -- the parser refused the stream
    "incomplete": bool,      # bytes ended in the middle of a message (EOF complaint is NOT an error)
    "eof_error": null | str, # what the parser said at EOF when incomplete (informational)
    "stopped": null | str,   # parser stopped without error and did not look at the rest:
                             #   "closed: ..."  client asked to close (Connection: close / HTTP/1.0)
                             #   "upgrade: ..." CONNECT / Upgrade / HTTP/2 preface
    "unparsed": int,         # bytes left unparsed after a stop (0 otherwise)
  }

All byte strings (method, target, names, values) are decoded as ISO-8859-1, so
byte 0xNN becomes code point U+00NN (lossless; compare bytes, not text).
h11 reports header names in their received case (raw_items()), but h11 itself
merges repeated identical Content-Length fields / "5, 5" lists into one field.
"""

import base64
import json
import sys
import traceback

import h11
import h11._connection as _h11conn
import llhttp


def _s(b):
    return bytes(b).decode("iso-8859-1")


def _ows_strip(b):
    return bytes(b).strip(b" \t")


def _b64(b):
    return base64.b64encode(bytes(b)).decode("ascii")


def _empty_result():
    return {"requests": [], "error": None, "incomplete": False,
            "eof_error": None, "stopped": None, "unparsed": 0}


def _exc(e):
    return "%s: %s" % (type(e).__name__, e)


# --------------------------------------------------------------------------- h11

def run_h11(data):
    r = _empty_result()
    conn = h11.Connection(h11.SERVER)
    eof = False
    pending_at_eof = False
    cur = None
    try:
        conn.receive_data(data)
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                if eof:  # should not happen: h11 raises or returns ConnectionClosed
                    r["incomplete"] = True
                    break
                buffered = conn.trailing_data[0]
                pending_at_eof = (cur is not None or conn.their_state is h11.SEND_BODY
                                  or len(buffered) > 0)
                conn.receive_data(b"")
                eof = True
                continue
            if ev is h11.PAUSED:
                r["stopped"] = "upgrade: h11 paused in state %s" % conn.their_state
                r["unparsed"] = len(conn.trailing_data[0])
                break
            if isinstance(ev, h11.Request):
                kind, args = _h11conn._body_framing(ev.method, ev)
                has_cl = any(n.lower() == b"content-length" for n, _ in ev.headers.raw_items())
                cur = {
                    "method": _s(ev.method),
                    "target": _s(ev.target),
                    "version": _s(ev.http_version),
                    "headers": [[_s(n), _s(_ows_strip(v))] for n, v in ev.headers.raw_items()],
                    "trailers": [],
                    "content_length": (args[0] if kind == "content-length" and has_cl else None),
                    "chunked": kind == "chunked",
                    "body": bytearray(),
                }
            elif isinstance(ev, h11.Data):
                cur["body"] += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                cur["trailers"] = [[_s(n), _s(_ows_strip(v))] for n, v in ev.headers.raw_items()]
                cur["body"] = _b64(cur["body"])
                r["requests"].append(cur)
                cur = None
                n = len(r["requests"])
                if conn.their_state is h11.MIGHT_SWITCH_PROTOCOL:
                    # CONNECT or Upgrade proposed; next_event() would return PAUSED.
                    r["stopped"] = "upgrade: client proposed a protocol switch in request %d" % n
                    r["unparsed"] = len(conn.trailing_data[0])
                    break
                if conn.their_state is h11.MUST_CLOSE:
                    r["stopped"] = "closed: client must close after request %d" % n
                    r["unparsed"] = len(conn.trailing_data[0])
                    break
                # Simulate the server answering, then start the next cycle.
                conn.send(h11.Response(status_code=200, headers=[("content-length", "0")]))
                conn.send(h11.EndOfMessage())
                if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                    conn.start_next_cycle()
                else:
                    r["stopped"] = "closed: states %s/%s after request %d" % (
                        conn.our_state, conn.their_state, n)
                    r["unparsed"] = len(conn.trailing_data[0])
                    break
            elif isinstance(ev, h11.ConnectionClosed):
                break
            else:
                r["error"] = "internal: unexpected event %r" % (ev,)
                break
    except h11.RemoteProtocolError as e:
        if eof and pending_at_eof:
            r["incomplete"] = True
            r["eof_error"] = _exc(e)
        else:
            r["error"] = _exc(e)
    except Exception as e:  # never let a case crash the run
        r["error"] = "internal: " + _exc(e)
    return r


# ------------------------------------------------------------------------ llhttp

class _LL(llhttp.Request):
    """Strict llhttp request parser that records complete messages."""

    def __init__(self):
        self.done = []
        self.cur = None
        self.close_after = False
        self._f = bytearray()
        self._v = bytearray()

    def on_message_begin(self):
        self.cur = {"method": bytearray(), "target": bytearray(), "version": None,
                    "headers": [], "trailers": [], "content_length": None,
                    "chunked": False, "body": bytearray(), "_hdone": False}
        self._f = bytearray()
        self._v = bytearray()

    def on_method(self, d):
        self.cur["method"] += d

    def on_url(self, d):
        self.cur["target"] += d

    def on_header_field(self, d):
        self._f += d

    def on_header_value(self, d):
        self._v += d

    def on_header_value_complete(self):
        lst = self.cur["trailers"] if self.cur["_hdone"] else self.cur["headers"]
        lst.append([_s(self._f), _s(_ows_strip(self._v))])
        self._f = bytearray()
        self._v = bytearray()

    def on_headers_complete(self):
        c = self.cur
        c["_hdone"] = True
        c["version"] = "%s.%s" % (self.major, self.minor)
        c["content_length"] = self.content_length  # None unless a CL field was parsed

    def on_chunk_header(self):
        # fires for every chunk including the last-chunk, so it fires for every
        # completed chunked message
        self.cur["chunked"] = True

    def on_body(self, d):
        self.cur["body"] += d

    def on_message_complete(self):
        c = self.cur
        if c["chunked"]:
            c["content_length"] = None
        self.close_after = not self.should_keep_alive
        self.done.append({
            "method": _s(c["method"]), "target": _s(c["target"]), "version": c["version"],
            "headers": c["headers"], "trailers": c["trailers"],
            "content_length": c["content_length"], "chunked": c["chunked"],
            "body": _b64(c["body"]),
        })
        self.cur = None
        self.pause()  # hand control back at every message boundary


def run_llhttp(data):
    r = _empty_result()
    p = None
    try:
        p = _LL()
        for flag in [a for a in dir(p) if a.startswith("lenient_")]:
            setattr(p, flag, False)
        pos = 0
        data = bytes(data)
        while True:
            try:
                n = p.execute(data[pos:])
            except llhttp.Error as e:
                r["error"] = _exc(e)
                break
            pos += n
            if p.is_upgrading:
                r["stopped"] = "upgrade: %s" % (p.error,)
                r["unparsed"] = len(data) - pos
                break
            if p.is_paused:  # our pause at a message boundary
                p.unpause()
                if p.close_after:
                    r["stopped"] = "closed: no keep-alive after request %d" % len(p.done)
                    r["unparsed"] = len(data) - pos
                    break
                continue  # also with nothing left: lets a pending upgrade pause surface
            if pos < len(data):  # should not happen
                r["error"] = "internal: execute stopped at %d/%d: %s" % (pos, len(data), p.error)
            break
        if r["error"] is None and r["stopped"] is None:
            try:
                p.finish()
                if p.cur is not None:
                    r["incomplete"] = True
            except llhttp.Error as e:
                if p.cur is not None:
                    r["incomplete"] = True
                    r["eof_error"] = _exc(e)
                else:
                    r["error"] = _exc(e)
    except Exception as e:
        r["error"] = "internal: " + _exc(e)
    if p is not None:
        r["requests"] = p.done
    return r


# -------------------------------------------------------------------------- main

def run_case(data):
    return {"h11": run_h11(data), "llhttp": run_llhttp(data)}


def _verdict(R):
    if R["error"]:
        return "REFUSE"
    if R["incomplete"]:
        return "incomplete"
    return "accept"


def summarize(name, res, out=sys.stdout):
    print("== %s" % name, file=out)
    for which in ("h11", "llhttp"):
        R = res[which]
        print("  %-7s %-10s reqs=%d%s%s%s" % (
            which, _verdict(R), len(R["requests"]),
            "  error=%s" % R["error"] if R["error"] else "",
            "  stopped=%s (unparsed %d)" % (R["stopped"], R["unparsed"]) if R["stopped"] else "",
            "  eof=%s" % R["eof_error"] if R["eof_error"] else ""), file=out)
        for q in R["requests"]:
            print("          %s %s HTTP/%s cl=%s chunked=%s body=%r hdrs=%s%s" % (
                q["method"], q["target"], q["version"], q["content_length"], q["chunked"],
                base64.b64decode(q["body"]), q["headers"],
                " trailers=%s" % q["trailers"] if q["trailers"] else ""), file=out)


SELF_TESTS = [
    ("simple-get", b"GET /echo HTTP/1.1\r\nHost: h\r\n\r\n"),
    ("pipeline", b"GET /tap/k1 HTTP/1.1\r\nHost: h\r\n\r\n"
                 b"POST /pay HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
                 b"POST /echo HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n"),
    ("cl-te", b"POST /pay HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    ("bare-lf", b"GET /echo HTTP/1.1\nHost: h\n\n"),
    ("truncated", b"POST /pay HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc"),
    ("close-pipeline", b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
                       b"GET /2 HTTP/1.1\r\nHost: h\r\n\r\n"),
    ("connect", b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n"),
    ("bad-method", b"G@T / HTTP/1.1\r\nHost: h\r\n\r\n"),
]


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        for name, data in SELF_TESTS:
            summarize(name, run_case(data))
        return 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], "rb") as f:
        corpus = json.load(f)
    results = {}
    for case in corpus:
        name = case.get("name", "?")
        try:
            data = base64.b64decode(case["bytes"], validate=True)
            results[name] = run_case(data)
        except Exception as e:
            err = _empty_result()
            err["error"] = "internal: bad corpus entry: " + _exc(e)
            results[name] = {"h11": err, "llhttp": dict(err)}
            traceback.print_exc(file=sys.stderr)
    with open(argv[2], "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
