/// A generated set of request-framing cases for the differential test: ordinary requests with
/// one part changed at a time (a line end, a separator, the method, the version, the spelling of
/// a framing field and its value, `Host`, a control byte in a value, a chunk size), each alone
/// and with a canary request pipelined behind it, so that a body read as a request shows.
enum HTTPFramingCases {
    struct Case {
        let name: String
        let bytes: [UInt8]
    }

    static let canary = Array("GET /canary HTTP/1.1\r\nHost: h\r\n\r\n".utf8)

    /// Every generated case, alone and then with the canary behind it.
    static var all: [Case] {
        var cases: [Case] = []
        func add(_ name: String, _ text: String) {
            let bytes = Array(text.utf8)
            cases.append(Case(name: "gen-\(name)", bytes: bytes))
            cases.append(Case(name: "gen-\(name)-canary", bytes: bytes + canary))
        }
        func addBytes(_ name: String, _ bytes: [UInt8]) {
            cases.append(Case(name: "gen-\(name)", bytes: bytes))
            cases.append(Case(name: "gen-\(name)-canary", bytes: bytes + canary))
        }
        for (index, end) in ["\r\n", "\n", "\r", "\r\r\n", "\n\r"].enumerated() {
            add("request-line-end-\(index)", "GET /a HTTP/1.1\(end)Host: h\r\n\r\n")
            add("field-line-end-\(index)", "GET /a HTTP/1.1\r\nHost: h\(end)X: y\r\n\r\n")
            add("head-end-\(index)", "GET /a HTTP/1.1\r\nHost: h\r\n\(end)")
        }
        for (index, separator) in [" ", "  ", "\t", " \t"].enumerated() {
            add("separator-\(index)", "GET\(separator)/a\(separator)HTTP/1.1\r\nHost: h\r\n\r\n")
        }
        for method in ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "TRACE", "CONNECT", "get", "BREW", "G(T"] {
            add("method-\(method.lowercased())-\(method.unicodeScalars.first?.value ?? 0)", "\(method) /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc")
        }
        for (index, version) in ["HTTP/1.1", "HTTP/1.0", "HTTP/1.2", "HTTP/2.0", "HTTP/0.9", "http/1.1", "HTTP/1.1x", "HTTP/11", "HTTP/1.1 ", "HTTP/ 1.1"].enumerated() {
            add("version-\(index)", "GET /a \(version)\r\nHost: h\r\n\r\n")
        }
        for (index, target) in ["/a?b=c", "/a#f", "*", "http://h/a", "https://h", "h:80", "/a%20b", "/a%2", "/a b", "/a\"b", "/a{b}", "//a"].enumerated() {
            add("target-\(index)", "GET \(target) HTTP/1.1\r\nHost: h\r\n\r\n")
        }
        let lengthNames = ["Content-Length:", "content-length:", "CONTENT-LENGTH:", "Content-Length :", "Content-Length\t:", " Content-Length:", "Content-Length:\t", "Content-Length:  "]
        for (index, name) in lengthNames.enumerated() {
            add("length-name-\(index)", "POST /a HTTP/1.1\r\nHost: h\r\n\(name) 5\r\n\r\nhello")
        }
        let lengths = ["5", "05", "+5", "-5", "5 ", " 5", "5\t", "5,5", "5, 5", "5,6", "0x5", "5.0", "", "1e1", "00000000000000000000000005", "5a", "٥"]
        for (index, length) in lengths.enumerated() {
            add("length-value-\(index)", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: \(length)\r\n\r\nhello")
        }
        add("length-twice-equal", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello")
        add("length-twice-different", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
        let codings = ["chunked", "Chunked", "CHUNKED", " chunked", "chunked ", "\tchunked", "identity", "gzip, chunked", "chunked, gzip", "chunked,chunked", ",chunked", "chunked;q=1", "x chunked", "chunked\u{0B}", "\"chunked\""]
        for (index, coding) in codings.enumerated() {
            add("coding-\(index)", "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \(coding)\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        }
        add("coding-and-length", "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        add("length-and-coding", "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        add("coding-http10", "POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        add("coding-split", "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        for (index, host) in ["Host: h\r\n", "", "Host: h\r\nHost: h\r\n", "Host: \r\n", "Host: h:80\r\n", "Host: [::1]:80\r\n", "Host: h h\r\n", "Host: h/x\r\n", "host: h\r\n"].enumerated() {
            add("host-\(index)", "GET /a HTTP/1.1\r\n\(host)\r\n")
        }
        for byte in [0x00, 0x01, 0x08, 0x0B, 0x0C, 0x1F, 0x7F, 0x80, 0xFF] as [UInt8] {
            addBytes(
                "value-byte-\(byte)",
                Array("GET /a HTTP/1.1\r\nHost: h\r\nX-Test: a".utf8) + [byte] + Array("b\r\n\r\n".utf8))
            addBytes(
                "name-byte-\(byte)",
                Array("GET /a HTTP/1.1\r\nHost: h\r\nX-T".utf8) + [byte] + Array(": b\r\n\r\n".utf8))
        }
        let sizes = ["5", "05", "0x5", " 5", "5 ", "5;a", "5;a=b", "5;a=\"b c\"", "5 ;a", "-5", "5\t", "000000005", "FFFFFFFFFFFF", "5;", "5;a=", "5;=b"]
        for (index, size) in sizes.enumerated() {
            add("chunk-size-\(index)", "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\nhello\r\n0\r\n\r\n")
        }
        for (index, data) in ["hello\r\n", "hello\n", "hellox\r\n", "hell\r\n", "hello"].enumerated() {
            add("chunk-data-\(index)", "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n\(data)0\r\n\r\n")
        }
        for (index, trailer) in ["", "X: y\r\n", "Content-Length: 5\r\n", "Transfer-Encoding: chunked\r\n", " X: y\r\n", "X : y\r\n"].enumerated() {
            add("trailer-\(index)", "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\(trailer)\r\n")
        }
        for (index, fold) in ["X: a\r\n b", "X: a\r\n\tb", "Transfer-Encoding: \r\n chunked"].enumerated() {
            add("fold-\(index)", "POST /a HTTP/1.1\r\nHost: h\r\n\(fold)\r\nContent-Length: 0\r\n\r\n")
        }
        for method in ["HEAD", "GET", "TRACE", "OPTIONS", "DELETE"] {
            let smuggled = "POST /pay HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"
            add("body-on-\(method.lowercased())", "\(method) /a HTTP/1.1\r\nHost: h\r\nContent-Length: \(smuggled.utf8.count)\r\n\r\n\(smuggled)")
        }
        add("connection-close", "GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        add("connection-list-close", "GET /a HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Close\r\n\r\n")
        add("http10-keep-alive", "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        add("upgrade", "GET /a HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
        add("expect-continue", "POST /a HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello")
        return cases
    }
}
