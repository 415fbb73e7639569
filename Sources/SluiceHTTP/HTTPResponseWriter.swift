import HTTPTypes

/// How one answer goes on the wire: what the request asked of the connection.
@usableFromInline
struct HTTPAnswerContext: Sendable, Hashable {
    /// The request was `HEAD`: the answer has no body (its `Content-Length` is the body's).
    @usableFromInline var isHead: Bool
    /// The connection closes after this answer (`Connection: close`).
    @usableFromInline var close: Bool
    /// An HTTP/1.0 request that asked to keep the connection (`Connection: keep-alive` back).
    @usableFromInline var keepAliveHTTP10: Bool

    @usableFromInline
    init(isHead: Bool, close: Bool, keepAliveHTTP10: Bool) {
        self.isHead = isHead
        self.close = close
        self.keepAliveHTTP10 = keepAliveHTTP10
    }
}

/// Renders answers as HTTP/1.1 responses: the status line, the answer's fields, then the
/// fields the server owns (`Content-Length`, `Date`, `Connection`), then the body.
enum HTTPResponseWriter {
    /// Fields an answer may not set: the server writes them.
    private static func isServerField(_ name: HTTPField.Name) -> Bool {
        name == .contentLength || name == .connection || name == .transferEncoding
            || name.canonicalName == "date"
    }

    /// Appends the response for `answer` (with `body` as its body) to `out`.
    static func render(
        status: HTTPResponse.Status, fields: HTTPFields, body: UnsafeRawBufferPointer, context: HTTPAnswerContext,
        date: [UInt8], into out: inout [UInt8]
    ) {
        appendStatic("HTTP/1.1 ", to: &out)
        let code = status.code
        out.append(UInt8(ascii: "0") + UInt8(code / 100 % 10))
        out.append(UInt8(ascii: "0") + UInt8(code / 10 % 10))
        out.append(UInt8(ascii: "0") + UInt8(code % 10))
        out.append(0x20)
        append(status.reasonPhrase, to: &out)
        appendStatic("\r\n", to: &out)
        for field in fields where !isServerField(field.name) {
            append(field.name.rawName, to: &out)
            appendStatic(": ", to: &out)
            append(field.value, to: &out)
            appendStatic("\r\n", to: &out)
        }
        // 1xx, 204 and 304 carry no body and no length (RFC 9110 §8.6).
        let bodiless = code < 200 || code == 204 || code == 304
        if !bodiless {
            appendStatic("Content-Length: ", to: &out)
            appendDecimal(body.count, to: &out)
            appendStatic("\r\n", to: &out)
        }
        appendStatic("Date: ", to: &out)
        out.append(contentsOf: date)
        appendStatic("\r\n", to: &out)
        if context.close {
            appendStatic("Connection: close\r\n", to: &out)
        } else if context.keepAliveHTTP10 {
            appendStatic("Connection: keep-alive\r\n", to: &out)
        }
        appendStatic("\r\n", to: &out)
        if !context.isHead && !bodiless {
            out.append(contentsOf: body)
        }
    }

    /// Appends `answer`'s response to `out`.
    static func render(_ answer: HTTPAnswer, context: HTTPAnswerContext, date: [UInt8], into out: inout [UInt8]) {
        answer.body.withUnsafeBytes { body in
            render(status: answer.status, fields: answer.fields, body: body, context: context, date: date, into: &out)
        }
    }

    static func appendStatic(_ text: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    static func append(_ text: String, to out: inout [UInt8]) {
        if let done: Void = text.utf8.withContiguousStorageIfAvailable({ out.append(contentsOf: $0) }) {
            return done
        }
        out.append(contentsOf: text.utf8)
    }

    static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        if value < 10 {
            out.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            while rest > 0 {
                buffer[count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                count += 1
            }
            for index in (0..<count).reversed() { out.append(buffer[index]) }
        }
    }
}
