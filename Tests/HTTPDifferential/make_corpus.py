#!/usr/bin/env python3
"""Writes the hand-made framing corpus of the HTTP differential test:

    python3 Tests/HTTPDifferential/make_corpus.py Tests/HTTPDifferential/corpus.json

Each case is the bytes one client sends on one connection (then it half-closes): the RFC 9112
and RFC 9110 framing rules, the request-smuggling corpora (CL.TE, TE.CL, TE.TE obfuscations,
bodies on HEAD/GET/TRACE that look like requests, obs-fold, bare LF/CR, controls in values,
chunk-size and extension tricks, trailers), and valid pipelines. `note` says what each probes.
"""
import base64, json, sys
cases = []
names = set()
def add(name, data, note):
    assert name not in names, name
    names.add(name)
    if isinstance(data, str):
        data = data.encode("latin-1")
    cases.append({"name": name, "bytes": base64.b64encode(data).decode(), "note": note})

H = "Host: h\r\n"
CH = "3\r\nabc\r\n0\r\n\r\n"          # valid chunked body "abc"
def post(path="/pay", hdrs="", body="", method="POST", ver="HTTP/1.1", host=True):
    return f"{method} {path} {ver}\r\n" + (H if host else "") + hdrs + "\r\n" + body
def te(v, body=CH, extra=""):
    return post("/pay", f"Transfer-Encoding: {v}\r\n" + extra, body)
def tech(body):          # chunked POST with given raw chunked body
    return post("/echo", "Transfer-Encoding: chunked\r\n", body)
def cl(v, body="hello"):
    return post("/pay", f"Content-Length: {v}\r\n", body)
GET2 = "GET /tap/k2 HTTP/1.1\r\nHost: h\r\n\r\n"
INNER = "POST /pay HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\n\r\namount="

# ---------------------------------------------------------------- baseline / pipelines
add("get-basic", "GET /tap/k1 HTTP/1.1\r\nHost: h\r\n\r\n", "baseline: minimal valid GET")
add("post-cl", cl(5), "baseline: POST with Content-Length body (RFC 9112 6.3 rule 6)")
add("post-chunked", tech("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"), "baseline: POST with chunked body, two chunks (RFC 9112 7.1)")
add("post-no-body", post("/pay"), "POST without CL/TE: body length 0 (RFC 9112 6.3 rule 7)")
add("get-cl-0", post("/tap/k1", "Content-Length: 0\r\n", method="GET"), "GET with Content-Length: 0")
add("pipeline-get-get", "GET /tap/k1 HTTP/1.1\r\nHost: h\r\n\r\n" + GET2, "pipeline of two GETs")
add("pipeline-3", "GET /tap/k1 HTTP/1.1\r\nHost: h\r\n\r\n" + cl(5) + tech("5\r\nhello\r\n0\r\n\r\n"),
    "pipeline GET, POST CL, POST chunked: both-accept path, requests must match")
add("pipeline-chunked-then-get", tech("3\r\nabc\r\n0\r\n\r\n") + GET2, "chunked message then pipelined GET")
add("pipeline-cl-then-get", cl(5) + GET2, "CL message then pipelined GET")
add("http10-get", "GET /tap/k1 HTTP/1.0\r\n\r\n", "HTTP/1.0 without Host is valid; implies close")
add("http10-then-pipeline", "GET /tap/k1 HTTP/1.0\r\n\r\n" + GET2, "HTTP/1.0 without keep-alive: second request must not be parsed")
add("http10-keepalive-pipeline", "GET /tap/k1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + GET2,
    "HTTP/1.0 keep-alive then pipelined request (h11 does not support 1.0 keep-alive)")
add("conn-close-pipeline", "GET /tap/k1 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" + GET2,
    "Connection: close then pipelined request which must not be parsed (RFC 9112 9.6)")
add("conn-close-then-garbage", "GET /tap/k1 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n\x00\x01garbage",
    "bytes after Connection: close must be ignored, not parsed")
add("conn-close-list", "GET /tap/k1 HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, close\r\n\r\n" + GET2,
    "close token inside a Connection list")
add("conn-close-case", "GET /tap/k1 HTTP/1.1\r\nHost: h\r\nConnection: CLOSE\r\n\r\n" + GET2,
    "Connection option is case-insensitive")
add("expect-100", post("/pay", "Expect: 100-continue\r\nContent-Length: 5\r\n", "hello"),
    "Expect: 100-continue with body (RFC 9110 10.1.1)")
add("expect-100-pipeline", post("/pay", "Expect: 100-continue\r\nContent-Length: 5\r\n", "hello") + GET2,
    "Expect: 100-continue, body sent anyway, then pipelined GET")
add("expect-unknown", post("/pay", "Expect: 200-ok\r\nContent-Length: 5\r\n", "hello"),
    "unknown expectation (server MAY 417); framing unaffected")
add("delete-with-body", post("/tap/k1", "Content-Length: 5\r\n", "hello", method="DELETE"), "DELETE with CL body")
add("put-chunked", post("/tap/k1", "Transfer-Encoding: chunked\r\n", CH, method="PUT"), "PUT chunked")

# ---------------------------------------------------------------- smuggling via bodies of bodiless methods
for m in ["GET", "HEAD", "TRACE", "OPTIONS", "DELETE"]:
    add(f"{m.lower()}-cl-smuggle", post("/tap/k1", f"Content-Length: {len(INNER)}\r\n", INNER, method=m),
        f"{m} with a Content-Length body that looks like a request: body must be consumed, never parsed as a request (RFC 9110 9.3)")
add("get-cl-partial-smuggle", post("/tap/k1", "Content-Length: 10\r\n", INNER, method="GET"),
    "GET body covers only part of the next request: remainder parsed as a request and must fail")
add("get-chunked-smuggle", post("/tap/k1", "Transfer-Encoding: chunked\r\n", f"{len(INNER):x}\r\n{INNER}\r\n0\r\n\r\n", method="GET"),
    "GET with chunked body containing a request")
add("head-no-cl-then-body", "HEAD /tap/k1 HTTP/1.1\r\nHost: h\r\n\r\n" + INNER,
    "HEAD without CL followed by POST: two requests")
add("get-cl0-then-request", post("/tap/k1", "Content-Length: 0\r\n", INNER, method="GET"),
    "GET CL 0 followed by a pipelined POST")

# ---------------------------------------------------------------- request line (RFC 9112 3)
RL = lambda line, hdr=H: line + "\r\n" + hdr + "\r\n"
add("rl-double-space-1", RL("GET  /tap/k1 HTTP/1.1"), "two SP between method and target (RFC 9112 3: single SP)")
add("rl-double-space-2", RL("GET /tap/k1  HTTP/1.1"), "two SP between target and version")
add("rl-tab-sep", RL("GET\t/tap/k1 HTTP/1.1"), "HTAB as request-line separator (RFC 9112 3: SHOULD NOT be accepted strictly)")
add("rl-tab-sep-2", RL("GET /tap/k1\tHTTP/1.1"), "HTAB between target and version")
add("rl-trailing-space", RL("GET /tap/k1 HTTP/1.1 "), "SP after HTTP-version")
add("rl-leading-space", RL(" GET /tap/k1 HTTP/1.1"), "SP before method")
add("rl-missing-version", "GET /tap/k1\r\n\r\n", "HTTP/0.9 style request line without version")
add("rl-missing-version-hdr", RL("GET /tap/k1"), "no version, with header line")
add("rl-missing-target", RL("GET HTTP/1.1"), "no request-target")
add("rl-empty-target", RL("GET  HTTP/1.1"), "empty request-target between two SP")
add("rl-lower-version", RL("GET /tap/k1 http/1.1"), "lowercase http/1.1 (HTTP-name is case-sensitive, RFC 9112 2.3)")
add("rl-http10-host", RL("GET /tap/k1 HTTP/1.0"), "HTTP/1.0 with Host")
add("rl-http12", RL("GET /tap/k1 HTTP/1.2"), "HTTP/1.2: higher minor, should be treated as 1.1 or refused")
add("rl-http20", RL("GET /tap/k1 HTTP/2.0"), "HTTP/2.0 in an HTTP/1 request line (RFC 9112 2.3: major version 2 -> 505)")
add("rl-http09", RL("GET /tap/k1 HTTP/0.9"), "HTTP/0.9 version token")
add("rl-http30", RL("GET /tap/k1 HTTP/3.0"), "HTTP/3.0")
add("rl-version-2digit-minor", RL("GET /tap/k1 HTTP/1.10"), "two-digit minor version (grammar is DIGIT.DIGIT)")
add("rl-version-leading-zero", RL("GET /tap/k1 HTTP/01.1"), "two-digit major version")
add("rl-version-no-minor", RL("GET /tap/k1 HTTP/1"), "version without minor")
add("rl-version-junk", RL("GET /tap/k1 HTTP/1.1x"), "trailing junk after version")
add("rl-lower-method", RL("get /tap/k1 HTTP/1.1"), "lowercase method: a valid token but not GET (methods are case-sensitive)")
add("rl-unknown-method", RL("FOO /tap/k1 HTTP/1.1"), "unknown but syntactically valid method token")
add("rl-method-nontoken", RL("G(ET /tap/k1 HTTP/1.1"), "non-token character in method")
add("rl-method-obs-text", RL("G\xc9T /tap/k1 HTTP/1.1"), "obs-text in method")
add("rl-absolute-form", RL("GET http://h/tap/k1 HTTP/1.1"), "absolute-form target (RFC 9112 3.2.2)")
add("rl-absolute-host-mismatch", RL("GET http://other/tap/k1 HTTP/1.1"), "absolute-form authority differs from Host (RFC 9112 3.2.2: Host is ignored/replaced)")
add("rl-absolute-https", RL("GET https://h/tap/k1 HTTP/1.1"), "absolute-form https")
add("rl-absolute-userinfo", RL("GET http://user@h/tap/k1 HTTP/1.1"), "absolute-form with userinfo (deprecated, RFC 9110 4.2.4)")
add("rl-asterisk-options", RL("OPTIONS * HTTP/1.1"), "asterisk-form with OPTIONS (valid)")
add("rl-asterisk-get", RL("GET * HTTP/1.1"), "asterisk-form with GET (only valid for OPTIONS)")
add("rl-authority-connect", RL("CONNECT h:443 HTTP/1.1", "Host: h:443\r\n"), "authority-form with CONNECT (valid)")
add("rl-authority-get", RL("GET h:443 HTTP/1.1"), "authority-form with GET (only valid for CONNECT)")
add("rl-connect-origin", RL("CONNECT /tap/k1 HTTP/1.1"), "CONNECT with origin-form target")
add("rl-fragment", RL("GET /tap/k1#frag HTTP/1.1"), "fragment in request target (not part of request-target grammar)")
add("rl-query", RL("GET /tap/k1?a=1&b=%20 HTTP/1.1"), "query string (valid)")
add("rl-non-ascii", RL("GET /caf\xc3\xa9 HTTP/1.1"), "raw UTF-8 (non-ASCII) in target")
add("rl-nul-target", RL("GET /tap/k1\x00x HTTP/1.1"), "NUL in target")
add("rl-ctl-target", RL("GET /tap/k1\x01x HTTP/1.1"), "C0 control 0x01 in target")
add("rl-del-target", RL("GET /tap/k1\x7fx HTTP/1.1"), "DEL in target")
add("rl-cr-target", RL("GET /tap/k1\rx HTTP/1.1"), "bare CR in target")
add("rl-lf-target", RL("GET /tap/k1\nx HTTP/1.1"), "bare LF in target splits the request line")
add("rl-vt-target", RL("GET /tap/k1\x0bx HTTP/1.1"), "VT in target")
add("rl-space-in-target", RL("GET /tap/k1 x HTTP/1.1"), "SP inside target (three tokens after method)")
add("rl-unsafe-chars", RL("GET /tap/k1\"<>{}|^` HTTP/1.1"), "characters not allowed in URI (RFC 3986) in target")
add("rl-backslash", RL("GET /tap\\k1 HTTP/1.1"), "backslash in target")
add("rl-pct-bad", RL("GET /tap/%zz HTTP/1.1"), "malformed percent-encoding (parsers usually do not decode)")
add("rl-leading-crlf", "\r\n" + RL("GET /tap/k1 HTTP/1.1"), "one empty line before request-line: SHOULD be ignored (RFC 9112 2.2)")
add("rl-leading-2crlf", "\r\n\r\n" + RL("GET /tap/k1 HTTP/1.1"), "two empty lines before request-line")
add("rl-leading-lf", "\n" + RL("GET /tap/k1 HTTP/1.1"), "bare LF before request-line")
add("rl-crlf-between-pipelined", RL("GET /tap/k1 HTTP/1.1") + "\r\n" + GET2, "extra CRLF between pipelined requests")
add("rl-trailing-crlf", RL("GET /tap/k1 HTTP/1.1") + "\r\n", "stray CRLF after the last request, then EOF")
add("rl-ws-before-first-header", "GET /tap/k1 HTTP/1.1\r\n " + H + "\r\n",
    "whitespace between start-line and first field line (RFC 9112 2.2: reject or consume as invalid)")
add("rl-ws-line-before-header", "GET /tap/k1 HTTP/1.1\r\n X: y\r\n" + H + "\r\n",
    "first field line starts with SP (looks like obs-fold of the request line)")
add("rl-long-target", RL("GET /tap/" + "a" * 9000 + " HTTP/1.1"), "9000-byte target (servers should 414 above their limit)")
add("rl-only-method", "GET\r\n\r\n", "request line with method only")
add("rl-garbage", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", "TLS ClientHello bytes sent to an HTTP port")

# ---------------------------------------------------------------- Host (RFC 9112 3.2)
add("host-missing", "GET /tap/k1 HTTP/1.1\r\n\r\n", "HTTP/1.1 without Host: MUST 400 (RFC 9112 3.2)")
add("host-dup-same", RL("GET /tap/k1 HTTP/1.1", "Host: h\r\nHost: h\r\n"), "two identical Host fields: MUST 400")
add("host-dup-diff", RL("GET /tap/k1 HTTP/1.1", "Host: h\r\nHost: evil\r\n"), "two different Host fields: MUST 400")
add("host-empty", RL("GET /tap/k1 HTTP/1.1", "Host:\r\n"), "empty Host (allowed only if authority is empty)")
add("host-list", RL("GET /tap/k1 HTTP/1.1", "Host: h, evil\r\n"), "comma list in Host: invalid host")
add("host-slash", RL("GET /tap/k1 HTTP/1.1", "Host: h/../evil\r\n"), "path characters in Host: invalid")
add("host-space", RL("GET /tap/k1 HTTP/1.1", "Host: h evil\r\n"), "SP inside Host value")
add("host-userinfo", RL("GET /tap/k1 HTTP/1.1", "Host: user@h\r\n"), "userinfo in Host: invalid")
add("host-port", RL("GET /tap/k1 HTTP/1.1", "Host: h:8080\r\n"), "Host with port (valid)")
add("host-bad-port", RL("GET /tap/k1 HTTP/1.1", "Host: h:80x\r\n"), "non-numeric port in Host")
add("host-ipv6", RL("GET /tap/k1 HTTP/1.1", "Host: [::1]:8080\r\n"), "IPv6 literal Host (valid)")
add("host-space-before-colon", RL("GET /tap/k1 HTTP/1.1", "Host : h\r\n"), "SP between Host and colon")
add("host-nul", RL("GET /tap/k1 HTTP/1.1", "Host: h\x00.evil\r\n"), "NUL in Host value")
add("host-utf8", RL("GET /tap/k1 HTTP/1.1", "Host: h\xc3\xa9\r\n"), "non-ASCII in Host")
add("host-http10-dup", RL("GET /tap/k1 HTTP/1.0", "Host: h\r\nHost: evil\r\n"), "duplicate Host on HTTP/1.0")

# ---------------------------------------------------------------- field syntax (RFC 9112 5, RFC 9110 5.5)
G = lambda hdr: RL("GET /tap/k1 HTTP/1.1", H + hdr)
add("hdr-space-before-colon", G("X-A : 1\r\n"), "SP between field name and colon: MUST 400 (RFC 9112 5.1)")
add("hdr-tab-before-colon", G("X-A\t: 1\r\n"), "HTAB between field name and colon")
add("hdr-no-colon", G("X-A 1\r\n"), "field line without colon")
add("hdr-empty-name", G(": x\r\n"), "empty field name")
add("hdr-name-space", G("X A: 1\r\n"), "SP inside field name")
add("hdr-name-paren", G("X(A): 1\r\n"), "non-token char '(' in field name")
add("hdr-name-at", G("X@A: 1\r\n"), "non-token char '@' in field name")
add("hdr-name-quote", G("X\"A: 1\r\n"), "non-token char '\"' in field name")
add("hdr-name-slash", G("X/A: 1\r\n"), "non-token char '/' in field name")
add("hdr-name-nul", G("X\x00A: 1\r\n"), "NUL in field name")
add("hdr-name-del", G("X\x7fA: 1\r\n"), "DEL in field name")
add("hdr-name-ctl", G("X\x01A: 1\r\n"), "C0 control in field name")
add("hdr-name-obs-text", G("X\xe9A: 1\r\n"), "obs-text byte in field name")
add("hdr-name-cr", G("X\rA: 1\r\n"), "bare CR in field name")
add("hdr-name-token-chars", G("!#$%&'*+-.^_`|~09Az: 1\r\n"), "every tchar class in a field name (valid)")
add("hdr-colon-in-value", G("X-A: b:c\r\n"), "colon inside value (valid)")
add("hdr-value-nul", G("X-A: a\x00b\r\n"), "NUL in field value: MUST reject or replace with SP (RFC 9110 5.5)")
add("hdr-value-cr", G("X-A: a\rb\r\n"), "bare CR in field value: MUST reject or replace (RFC 9110 5.5)")
add("hdr-value-ctl-01", G("X-A: a\x01b\r\n"), "C0 0x01 in field value (not field-vchar)")
add("hdr-value-ctl-1f", G("X-A: a\x1fb\r\n"), "C0 0x1F in field value")
add("hdr-value-esc", G("X-A: a\x1b[31mb\r\n"), "ESC (terminal escape) in field value")
add("hdr-value-del", G("X-A: a\x7fb\r\n"), "DEL in field value")
add("hdr-value-vt", G("X-A: a\x0bb\r\n"), "VT in field value")
add("hdr-value-ff", G("X-A: a\x0cb\r\n"), "FF in field value")
add("hdr-value-obs-text", G("X-A: caf\xe9 \x80\xff\r\n"), "obs-text 0x80-0xFF in field value (allowed by grammar)")
add("hdr-value-utf8", G("X-A: caf\xc3\xa9\r\n"), "UTF-8 in field value (obs-text)")
add("hdr-value-htab-inner", G("X-A: a\tb\r\n"), "HTAB inside field value (valid)")
add("hdr-value-ows", G("X-A: \t  a b \t \r\n"), "leading/trailing OWS, must be stripped")
add("hdr-value-empty", G("X-A:\r\n"), "empty field value (valid)")
add("hdr-value-only-ws", G("X-A:   \r\n"), "value of only whitespace (valid, empty)")
add("idem-key-nul", post("/pay", "Idempotency-Key: \"order\x00-A\"\r\nContent-Length: 5\r\n", "hello"),
    "NUL inside a quoted Idempotency-Key (key truncation / confusion)")
add("idem-key-cr", post("/pay", "Idempotency-Key: \"order\r-A\"\r\nContent-Length: 5\r\n", "hello"),
    "bare CR inside Idempotency-Key")
add("idem-key-obs-text", post("/pay", "Idempotency-Key: \"order\xff-A\"\r\nContent-Length: 5\r\n", "hello"),
    "obs-text inside Idempotency-Key")
add("idem-key-dup", post("/pay", "Idempotency-Key: a\r\nIdempotency-Key: b\r\nContent-Length: 5\r\n", "hello"),
    "two Idempotency-Key fields (framing valid; application must decide)")
add("hdr-obs-fold", G("X-A: 1\r\n 2\r\n"), "obs-fold (SP) in a field value: reject or replace with SP (RFC 9112 5.2)")
add("hdr-obs-fold-tab", G("X-A: 1\r\n\t2\r\n"), "obs-fold with HTAB")
add("hdr-obs-fold-empty-first", G("X-A:\r\n 2\r\n"), "obs-fold where the first line value is empty")
add("hdr-bare-lf-end", "GET /tap/k1 HTTP/1.1\r\nHost: h\nX-A: 1\r\n\r\n", "bare LF terminates one field line (RFC 9112 2.2: MAY accept)")
add("hdr-bare-cr-end", "GET /tap/k1 HTTP/1.1\r\nHost: h\rX-A: 1\r\n\r\n", "bare CR as field line terminator: MUST reject or replace (RFC 9112 2.2)")
add("hdr-end-bare-lf", "GET /tap/k1 HTTP/1.1\r\nHost: h\r\n\n", "empty line terminated by bare LF")
add("hdr-end-cr-cr", "GET /tap/k1 HTTP/1.1\r\nHost: h\r\n\r\r\n", "empty line with extra CR")
add("hdr-end-lf-cr", "GET /tap/k1 HTTP/1.1\r\nHost: h\n\r\n", "LF then CRLF ending headers")
add("bare-lf-all", "GET /tap/k1 HTTP/1.1\nHost: h\n\n", "all lines terminated by bare LF")
add("bare-lf-request-line", "GET /tap/k1 HTTP/1.1\nHost: h\r\n\r\n", "bare LF after request line only")
add("bare-cr-request-line", "GET /tap/k1 HTTP/1.1\rHost: h\r\n\r\n", "bare CR after request line")
add("bare-cr-all", "GET /tap/k1 HTTP/1.1\rHost: h\r\r", "all lines terminated by bare CR")
add("hdr-value-20k", G("X-A: " + "a" * 20000 + "\r\n"), "20 KB field value (h11 enforces its 16 KiB limit only while waiting for more data); servers need a limit (431)")
add("hdr-many", G("".join(f"X-{i}: {i}\r\n" for i in range(200))), "200 field lines")
add("hdr-name-trailing-ws-te", post("/pay", "Transfer-Encoding\t: chunked\r\n", CH),
    "HTAB before colon of Transfer-Encoding")

# ---------------------------------------------------------------- Content-Length (RFC 9110 8.6, RFC 9112 6.3)
add("cl-zero", cl(0, ""), "Content-Length: 0 (valid)")
add("cl-space-before-colon", post("/pay", "Content-Length : 5\r\n", "hello"), "SP before colon in Content-Length: MUST 400")
add("cl-neg-zero", cl("-0", ""), "Content-Length: -0 (not 1*DIGIT)")
add("cl-plus", cl("+5"), "Content-Length: +5 (not 1*DIGIT)")
add("cl-hex", cl("0x5"), "Content-Length: 0x5")
add("cl-decimal", cl("5.0"), "Content-Length: 5.0")
add("cl-ows-tabs", cl("\t 5 \t"), "Content-Length with leading/trailing SP/HTAB (OWS, valid)")
add("cl-list-equal", cl("5, 5"), "Content-Length: 5, 5 (RFC 9110 8.6: MAY accept as 5, or reject)")
add("cl-list-diff", cl("5,6", "hello!"), "Content-Length: 5,6 : MUST reject")
add("cl-list-trailing-comma", cl("5,"), "Content-Length: 5, (empty list element)")
add("cl-list-leading-comma", cl(",5"), "Content-Length: ,5")
add("cl-dup-equal", post("/pay", "Content-Length: 5\r\nContent-Length: 5\r\n", "hello"), "two equal Content-Length lines (MAY accept)")
add("cl-dup-diff", post("/pay", "Content-Length: 5\r\nContent-Length: 6\r\n", "hello!"), "two different Content-Length lines: MUST reject")
add("cl-dup-diff-smuggle", post("/pay", f"Content-Length: 0\r\nContent-Length: {len(INNER)}\r\n", INNER),
    "CL.CL desync: 0 then N, body is a request")
add("cl-huge", cl("99999999999999999999"), "20-digit Content-Length (overflows 64-bit)")
add("cl-2pow64", cl("18446744073709551616"), "Content-Length 2^64 (wraps to 0 on naive overflow)")
add("cl-2pow64-plus5", cl("18446744073709551621"), "Content-Length 2^64+5 (wraps to 5 on naive overflow)")
add("cl-2pow63", cl("9223372036854775808"), "Content-Length 2^63 (overflows Int64)")
add("cl-large-valid", cl("1000000"), "large but valid Content-Length, body short: incomplete at EOF")
add("cl-leading-tab", cl("\t5"), "HTAB before value (OWS, valid)")
add("cl-trailing-space", cl("5 "), "SP after value (OWS, valid)")
add("cl-trailing-tab", cl("5\t"), "HTAB after value (OWS, valid; llhttp quirk)")
add("cl-leading-zeros", cl("0005"), "leading zeros (valid 1*DIGIT)")
add("cl-many-zeros", cl("0" * 30 + "5"), "31-digit Content-Length with value 5")
add("cl-empty", post("/pay", "Content-Length:\r\n", "hello"), "empty Content-Length value")
add("cl-negative", cl("-5"), "negative Content-Length")
add("cl-letters", cl("5a"), "digits followed by letters")
add("cl-inner-space", cl("1 0", "helloworld"), "SP between digits")
add("cl-vt", cl("\x0b5"), "VT before digits")
add("cl-nul", cl("5\x00"), "NUL after digits")
add("cl-unicode-digit", cl("\xd9\xa5"), "ARABIC-INDIC DIGIT FIVE (UTF-8): Python int()/unicode parsers may accept")
add("cl-underscore", cl("0_5"), "underscore between digits (Python int() accepts)")
add("cl-body-short", cl(10, "hello"), "body shorter than CL then EOF: incomplete")
add("cl-body-long", cl(3, "hello"), "body longer than CL: extra bytes are parsed as the next request")
add("cl-obs-fold", post("/pay", "Content-Length:\r\n 5\r\n", "hello"), "obs-fold in Content-Length")
add("cl-upper-name", post("/pay", "CONTENT-LENGTH: 5\r\n", "hello"), "uppercase field name (valid)")
add("cl-name-underscore", post("/pay", "Content_Length: 5\r\n", "hello"), "Content_Length is a different field: body becomes next request")

# ---------------------------------------------------------------- Transfer-Encoding (RFC 9112 6.1, 6.3)
add("te-chunked", te("chunked"), "Transfer-Encoding: chunked (valid)")
add("te-identity", te("identity", "hello"), "identity is not a registered coding in RFC 9112; not chunked final -> 400")
add("te-chunked-chunked", te("chunked, chunked"), "chunked applied twice: MUST NOT (RFC 9112 7)")
add("te-gzip-chunked", te("gzip, chunked"), "gzip then chunked: valid framing (chunked final), coding unsupported -> 501 allowed")
add("te-chunked-gzip", te("chunked, gzip"), "chunked not final in a request: MUST 400 (RFC 9112 6.3 rule 4)")
add("te-Chunked", te("Chunked"), "coding names are case-insensitive (valid)")
add("te-CHUNKED", te("CHUNKED"), "uppercase coding name (valid)")
add("te-vt-chunked", te("\x0bchunked"), "VT before chunked (not OWS)")
add("te-ff-chunked", te("\x0cchunked"), "FF before chunked")
add("te-tab-chunked", te("\tchunked"), "HTAB before chunked (OWS, valid)")
add("te-xchunked", te("xchunked"), "xchunked: unknown coding")
add("te-chunked-trailing-space", te("chunked "), "trailing SP (OWS, valid)")
add("te-list-no-space", te("gzip,chunked"), "list without SP (valid framing, gzip unsupported)")
add("te-chunked-trailing-vt", te("chunked\x0b"), "trailing VT after chunked")
add("te-space-before-colon", post("/pay", "Transfer-Encoding : chunked\r\n", CH), "SP before colon in Transfer-Encoding: MUST 400")
add("te-cl-both", post("/pay", f"Content-Length: {len(CH)}\r\nTransfer-Encoding: chunked\r\n", CH),
    "CL then TE: TE overrides; server MAY process as chunked but ought to close / may reject (RFC 9112 6.3 rule 3)")
add("te-cl-both-te-first", post("/pay", f"Transfer-Encoding: chunked\r\nContent-Length: {len(CH)}\r\n", CH), "TE then CL")
add("te-cl-smuggle-clte", post("/pay", "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\nG" + GET2),
    "classic CL.TE desync payload")
add("te-cl-smuggle-tecl", post("/pay", "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", f"{len(INNER):x}\r\n{INNER}\r\n0\r\n\r\n"),
    "classic TE.CL desync payload")
add("te-http10", post("/pay", "Transfer-Encoding: chunked\r\n", CH, ver="HTTP/1.0"),
    "TE on HTTP/1.0: SHOULD treat as faulty framing and close (RFC 9112 6.1)")
add("te-http10-cl", post("/pay", f"Transfer-Encoding: chunked\r\nContent-Length: {len(CH)}\r\n", CH, ver="HTTP/1.0"),
    "TE + CL on HTTP/1.0")
add("te-two-lines", post("/pay", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", CH), "TE split over two field lines (= gzip, chunked)")
add("te-two-lines-chunked-twice", post("/pay", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", CH), "chunked in two field lines (chunked twice)")
add("te-two-lines-chunked-first", post("/pay", "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", CH), "chunked then identity on separate lines: chunked not final")
add("te-obs-fold", post("/pay", "Transfer-Encoding:\r\n chunked\r\n", CH), "obs-fold of Transfer-Encoding value")
add("te-obs-fold-list", post("/pay", "Transfer-Encoding: gzip,\r\n chunked\r\n", CH), "obs-fold continuing a TE list")
add("te-fold-into-prev", post("/pay", "X-A: 1\r\n Transfer-Encoding: chunked\r\n", CH), "TE hidden as obs-fold continuation of another field")
add("te-empty", post("/pay", "Transfer-Encoding:\r\n", CH), "empty Transfer-Encoding")
add("te-comma-first", te(",chunked"), "leading empty list element (RFC 9110 5.6.1: recipient MUST accept empty elements)")
add("te-quoted", te("\"chunked\""), "quoted chunked")
add("te-param", te("chunked;q=1"), "parameter on chunked (chunked has no parameters)")
add("te-nul", te("chunked\x00"), "NUL after chunked")
add("te-name-underscore", post("/pay", "Transfer_Encoding: chunked\r\n", CH), "Transfer_Encoding: different field, body becomes next request")
add("te-kelvin", te("chun\xe2\x84\xaaed"), "KELVIN SIGN (U+212A) lowercases to 'k' in Unicode-aware lowercasing")
add("te-get-chunked", post("/tap/k1", "Transfer-Encoding: chunked\r\n", CH, method="GET"), "GET with chunked body")

# ---------------------------------------------------------------- chunked coding (RFC 9112 7.1)
add("chunk-size-0x", tech("0x3\r\nabc\r\n0\r\n\r\n"), "0x prefix in chunk-size")
add("chunk-size-lead-space", tech(" 3\r\nabc\r\n0\r\n\r\n"), "leading SP in chunk-size")
add("chunk-size-trail-space", tech("3 \r\nabc\r\n0\r\n\r\n"), "trailing SP after chunk-size (only BWS before ';' is allowed)")
add("chunk-size-trail-tab", tech("3\t\r\nabc\r\n0\r\n\r\n"), "trailing HTAB after chunk-size")
add("chunk-size-plus", tech("+3\r\nabc\r\n0\r\n\r\n"), "+ sign in chunk-size")
add("chunk-size-neg", tech("-3\r\nabc\r\n0\r\n\r\n"), "negative chunk-size")
add("chunk-size-17-digits", tech("00000000000000003\r\nabc\r\n0\r\n\r\n"), "17 hex digits, value 3 (leading zeros)")
add("chunk-size-overflow", tech("10000000000000003\r\nabc\r\n0\r\n\r\n"), "2^64+3: wraps to 3 on naive 64-bit overflow")
add("chunk-size-fff", tech("fffffffffffffffff\r\nabc\r\n0\r\n\r\n"), "17 f's: overflow")
add("chunk-size-upper", tech("A\r\n0123456789\r\n0\r\n\r\n"), "uppercase hex (valid)")
add("chunk-size-lower", tech("a\r\n0123456789\r\n0\r\n\r\n"), "lowercase hex (valid)")
add("chunk-size-empty", tech("\r\nabc\r\n0\r\n\r\n"), "empty chunk-size line")
add("chunk-size-nonhex", tech("g\r\nabc\r\n0\r\n\r\n"), "non-hex chunk-size")
add("chunk-size-underscore", tech("0_3\r\nabc\r\n0\r\n\r\n"), "underscore in chunk-size (Python int(x,16) accepts)")
add("chunk-size-unicode", tech("\xd9\xa3\r\nabc\r\n0\r\n\r\n"), "non-ASCII digit as chunk-size")
add("chunk-last-zeros", tech("3\r\nabc\r\n000\r\n\r\n"), "last-chunk written as 000 (1*\"0\", valid)")
add("chunk-ext-name", tech("3;foo\r\nabc\r\n0\r\n\r\n"), "chunk-ext without value (valid)")
add("chunk-ext-value", tech("3;foo=bar\r\nabc\r\n0\r\n\r\n"), "chunk-ext token value (valid)")
add("chunk-ext-quoted", tech("3;foo=\"b a;r\"\r\nabc\r\n0\r\n\r\n"), "quoted-string chunk-ext value (valid)")
add("chunk-ext-quoted-escape", tech("3;foo=\"a\\\"b\"\r\nabc\r\n0\r\n\r\n"), "quoted-pair inside chunk-ext value (valid)")
add("chunk-ext-bws", tech("3 ; foo = bar\r\nabc\r\n0\r\n\r\n"), "BWS around ';' and '=' (allowed by RFC 9112 7.1.1)")
add("chunk-ext-multi", tech("3;a=1;b;c=\"x\"\r\nabc\r\n0\r\n\r\n"), "several extensions")
add("chunk-ext-bad-char", tech("3;fo o\r\nabc\r\n0\r\n\r\n"), "SP inside chunk-ext name")
add("chunk-ext-empty-name", tech("3;=x\r\nabc\r\n0\r\n\r\n"), "empty chunk-ext name")
add("chunk-ext-semicolon-only", tech("3;\r\nabc\r\n0\r\n\r\n"), "';' with no extension name")
add("chunk-ext-lf", tech("3;foo\nbar\r\nabc\r\n0\r\n\r\n"), "bare LF inside chunk-ext (funky-chunks TERM.EXT)")
add("chunk-ext-cr", tech("3;foo\rbar\r\nabc\r\n0\r\n\r\n"), "bare CR inside chunk-ext")
add("chunk-ext-nul", tech("3;foo\x00\r\nabc\r\n0\r\n\r\n"), "NUL inside chunk-ext")
add("chunk-ext-obs-text", tech("3;foo=\"\xff\"\r\nabc\r\n0\r\n\r\n"), "obs-text inside quoted chunk-ext (qdtext allows obs-text)")
add("chunk-ext-last", tech("3\r\nabc\r\n0;x=y\r\n\r\n"), "chunk-ext on last-chunk (valid)")
add("chunk-ext-unterminated-quote", tech("3;a=\"x\r\nabc\r\n0\r\n\r\n"), "unterminated quoted-string in chunk-ext")
add("chunk-bare-lf-size", tech("3\nabc\r\n0\r\n\r\n"), "bare LF after chunk-size")
add("chunk-bare-lf-data", tech("3\r\nabc\n0\r\n\r\n"), "bare LF after chunk-data (funky-chunks one-byte terminator)")
add("chunk-bare-lf-last", tech("3\r\nabc\r\n0\n\n"), "bare LF after last-chunk and final line")
add("chunk-bare-cr-size", tech("3\rabc\r\n0\r\n\r\n"), "bare CR after chunk-size")
add("chunk-no-crlf-data", tech("3\r\nabc0\r\n\r\n"), "missing CRLF after chunk-data")
add("chunk-wrong-term", tech("3\r\nabcXX0\r\n\r\n"), "two arbitrary bytes instead of CRLF after chunk-data (length-based terminator skipping)")
add("chunk-data-long", tech("3\r\nabcd\r\n0\r\n\r\n"), "chunk-data longer than chunk-size")
add("chunk-data-short", tech("5\r\nabc\r\n0\r\n\r\n"), "chunk-data shorter than chunk-size")
add("chunk-no-last", tech("3\r\nabc\r\n"), "no last-chunk, EOF: incomplete")
add("chunk-last-no-crlf", tech("3\r\nabc\r\n0\r\n"), "last-chunk without final CRLF, EOF: incomplete")
add("chunk-zero-data", tech("0\r\nabc\r\n\r\n"), "data after the last-chunk line is parsed as a trailer field")
add("chunk-multi", tech("1\r\na\r\n2\r\nbc\r\n3\r\ndef\r\n0\r\n\r\n"), "several chunks (valid)")
add("chunk-trailer", tech("3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n"), "trailer field (valid)")
add("chunk-trailer-cl", tech(f"3\r\nabc\r\n0\r\nContent-Length: {len(INNER)}\r\n\r\n" + INNER),
    "Content-Length in trailer must not change framing (RFC 9110 6.5.1)")
add("chunk-trailer-te", tech("3\r\nabc\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n" + GET2), "Transfer-Encoding in trailer")
add("chunk-trailer-host", tech("3\r\nabc\r\n0\r\nHost: evil\r\n\r\n"), "Host in trailer")
add("chunk-trailer-fold", tech("3\r\nabc\r\n0\r\nX-T: 1\r\n 2\r\n\r\n"), "obs-fold in trailer")
add("chunk-trailer-bad-name", tech("3\r\nabc\r\n0\r\nX T: 1\r\n\r\n"), "SP in trailer field name")
add("chunk-trailer-no-colon", tech("3\r\nabc\r\n0\r\nXT\r\n\r\n"), "trailer line without colon")
add("chunk-trailer-nul", tech("3\r\nabc\r\n0\r\nX-T: a\x00b\r\n\r\n"), "NUL in trailer value")
add("chunk-trailer-bare-lf", tech("3\r\nabc\r\n0\r\nX-T: 1\n\r\n"), "bare LF ending a trailer line")
add("chunk-trailer-space-colon", tech("3\r\nabc\r\n0\r\nX-T : 1\r\n\r\n"), "SP before colon in trailer")

# ---------------------------------------------------------------- upgrade / CONNECT / h2
add("upgrade-ws", RL("GET /tap/k1 HTTP/1.1", H + "Upgrade: websocket\r\nConnection: Upgrade\r\n") + "\x81\x05hello",
    "WebSocket upgrade; following bytes belong to the new protocol")
add("upgrade-no-conn", RL("GET /tap/k1 HTTP/1.1", H + "Upgrade: websocket\r\n") + GET2,
    "Upgrade without Connection: upgrade is not an upgrade (RFC 9110 7.8); pipeline continues")
add("upgrade-h2c", RL("GET /tap/k1 HTTP/1.1", H + "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n"),
    "h2c upgrade request")
add("upgrade-with-body", post("/echo", "Upgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: 5\r\n", "hello") + GET2,
    "upgrade request with a body, then bytes")
add("connect-tunnel", RL("CONNECT h:443 HTTP/1.1", "Host: h:443\r\n") + "\x16\x03\x01tunnel",
    "CONNECT followed by tunnel bytes")
add("connect-cl", RL("CONNECT h:443 HTTP/1.1", "Host: h:443\r\nContent-Length: 5\r\n") + "hello",
    "CONNECT with Content-Length (CONNECT has no content, RFC 9110 9.3.6)")
add("h2-preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HTTP/2 connection preface sent to an HTTP/1.1 server")

# ---------------------------------------------------------------- PortSwigger/smuggler-style TE obfuscations (no CL: TE alone decides)
PS = [
    ("ps-nospace", "Transfer-Encoding:chunked", "no SP after colon (valid)"),
    ("ps-tab-colon", "Transfer-Encoding\t:\tchunked", "HTAB before and after colon"),
    ("ps-spacejoin", "Transfer Encoding: chunked", "SP instead of hyphen in name"),
    ("ps-smashed", "Transfer Encoding:chunked", "SP in name, no SP after colon"),
    ("ps-valueprefix", "Transfer-Encoding:  chunked", "two SP before value (valid OWS)"),
    ("ps-commacow", "Transfer-Encoding: chunked, cow", "chunked not final"),
    ("ps-cowcomma", "Transfer-Encoding: cow, chunked", "unknown coding before chunked"),
    ("ps-contentenc", "Content-Encoding: chunked", "chunked in Content-Encoding, not TE"),
    ("ps-linewrap-lf", "Transfer-Encoding:\n chunked", "value on bare-LF obs-fold line"),
    ("ps-aposed", "Transfer-Encoding: 'chunked'", "single-quoted coding"),
    ("ps-lazygrep", "Transfer-Encoding: chunk", "truncated coding name"),
    ("ps-sarcasm", "TrAnSFer-EnCODinG: cHuNkeD", "mixed case name and value (valid)"),
    ("ps-0dsuffix", "Transfer-Encoding: chunked\r", "extra CR after value (CR CR LF)"),
    ("ps-tabsuffix", "Transfer-Encoding: chunked\t", "HTAB after value (valid OWS)"),
    ("ps-revdualchunk", "Transfer-Encoding: cow\r\nTransfer-Encoding: chunked", "unknown then chunked on two lines"),
    ("ps-dualchunk", "Transfer-Encoding: chunked\r\nTransfer-Encoding: cow", "chunked then unknown on two lines"),
    ("ps-0dspam", "Transfer\r-Encoding: chunked", "CR inside field name"),
    ("ps-nested", "Transfer-Encoding: cow chunked bar", "chunked between other words"),
    ("ps-spaceff", "Transfer-Encoding:\xffchunked", "0xFF before value"),
    ("ps-accent-te", "Transf\x82r-Encoding: chunked", "0x82 inside name"),
    ("ps-x-rout", "X: X\rTransfer-Encoding: chunked", "bare CR splitting a previous field from TE"),
    ("ps-x-nout", "X: X\nTransfer-Encoding: chunked", "bare LF splitting a previous field from TE"),
    ("ps-prespace-20", " Transfer-Encoding: chunked", "SP before name: obs-fold continuation of the preceding Host line"),
    ("ps-midspace-a0", "Transfer-Encoding:\xa0chunked", "NBSP (0xA0) before value"),
    ("ps-midspace-85", "Transfer-Encoding:\x85chunked", "NEL (0x85) before value"),
    ("ps-endspace-0c", "Transfer-Encoding: chunked\x0c", "FF after value"),
    ("ps-endspace-00", "Transfer-Encoding: chunked\x00", "NUL after value"),
    ("ps-postspace-0b", "Transfer-Encoding\x0b: chunked", "VT between name and colon"),
]
for name, line, note in PS:
    add(name, post("/pay", line + "\r\n", CH), "TE obfuscation (PortSwigger smuggler): " + note)
# CL variants of PortSwigger probes: obfuscated TE together with CL
for name, line, note in [("ps-cl-spacefix", "Transfer-Encoding : chunked", "SP before colon"),
                         ("ps-cl-vert", "Transfer-Encoding:\x0bchunked", "VT prefix"),
                         ("ps-cl-xchunked", "Transfer-Encoding: xchunked", "unknown coding"),
                         ("ps-cl-fold", "X: y\r\n Transfer-Encoding: chunked", "folded into previous field")]:
    add(name, post("/pay", f"Content-Length: 4\r\n{line}\r\n", f"{len(INNER):x}\r\n{INNER}\r\n0\r\n\r\n"),
        "TE.CL probe with obfuscated TE + CL 4: " + note)

# ---------------------------------------------------------------- HTTP Garden / funky-chunks style framing cases
add("garden-chunk-ext-lf-smuggle", tech("2;\nxx\r\n45\r\n0\r\n\r\n" + INNER[:20]),
    "Garden/funky-chunks: LF ends the chunk line for one parser, ext for another")
add("garden-chunk-size-wrap", tech("1000000000000000000000003\r\nabc\r\n0\r\n\r\n"), "Garden: chunk-size integer truncation")
add("garden-chunk-spill", tech("3\r\nabcdef\r\n0\r\n\r\n" ), "Garden: chunk data spill past size (TERM.SPILL)")
add("garden-chunk-lf-term-smuggle", tech("3\r\nabc\n5\r\nhello\r\n0\r\n\r\n"), "Garden: LF-only chunk terminator followed by another chunk")
add("garden-cl-comma-smuggle", post("/pay", f"Content-Length: {len(INNER)}, 0\r\n", INNER), "Garden: CL list with differing values")
add("garden-te-cl-http10", post("/pay", f"Content-Length: {len(INNER)}\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n" + INNER[5:], ver="HTTP/1.0"),
    "Garden: HTTP/1.0 with TE+CL")
add("garden-nul-in-method-line", "GET /tap/k1 HTTP/1.1\x00\r\n" + H + "\r\n", "Garden: NUL after version")
add("garden-version-space", RL("GET /tap/k1 HTTP/ 1.1"), "Garden: SP inside version")
add("garden-header-cr-value", G("X-A: \rTransfer-Encoding: chunked\r\n"), "Garden: bare CR at start of value")
add("garden-te-trailing-comma", te("chunked,"), "Garden: trailing comma after chunked (empty list element)")
add("garden-te-ows-comma", te("chunked ,"), "Garden: chunked followed by OWS and comma")
add("garden-chunked-lf-crlf", tech("3\r\nabc\r\n0\r\n\n"), "Garden: last line LF only after last-chunk")
add("garden-trailer-colon-only", tech("3\r\nabc\r\n0\r\n:\r\n\r\n"), "Garden: trailer with empty name")
add("garden-cl-then-space-name", post("/pay", "Content-Length: 5\r\n Content-Length: 0\r\n", "hello"), "Garden: second CL hidden as obs-fold")
add("garden-empty-chunk-ext-value", tech("3;a=\r\nabc\r\n0\r\n\r\n"), "Garden: chunk-ext with '=' but no value")
add("garden-head-te", post("/tap/k1", "Transfer-Encoding: chunked\r\n", CH, method="HEAD"), "Garden: HEAD with chunked body")
add("garden-options-chunked-smuggle", post("*", "Transfer-Encoding: chunked\r\n", f"{len(INNER):x}\r\n{INNER}\r\n0\r\n\r\n", method="OPTIONS"),
    "Garden: OPTIONS * with chunked body containing a request")
add("garden-ws-after-name-then-cl", post("/pay", "Content-Length\x20\x20: 5\r\n", "hello"), "Garden: two SP before colon")
add("garden-method-space-lf", "GET /tap/k1 HTTP/1.1\r\n\nHost: h\r\n\r\n", "Garden: CRLF LF splits headers early (Host becomes next request)")
add("garden-cl-0-pipeline-chunk", post("/pay", "Content-Length: 0\r\n", "0\r\n\r\n"), "Garden: CL 0 then stray chunk terminator parsed as next request")

json.dump(cases, open(sys.argv[1], "w"), indent=1)
print(len(cases), "cases")
