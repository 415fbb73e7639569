import HTTPTypes

/// An RFC 9457 problem: the body (`application/problem+json`) of every error the HTTP front
/// answers, with `type` (`urn:sluice:problem:<slug>`), `title`, `status` and `detail`.
public struct HTTPProblem: Error, Sendable, Hashable {
    /// The status.
    public var status: HTTPResponse.Status
    /// A short name for the kind of problem (`throttled`, `bad-amount`), the end of `type`.
    public var slug: String
    /// What happened to this request.
    public var detail: String
    /// Extra members (`"reason"` for a declined payment), string-valued.
    public var extensions: [String: String]

    /// A problem of kind `slug` answered with `status`.
    public init(_ status: HTTPResponse.Status, _ slug: String, detail: String, extensions: [String: String] = [:]) {
        self.status = status
        self.slug = slug
        self.detail = detail
        self.extensions = extensions
    }

    /// The problem's `type`.
    public var type: String { "urn:sluice:problem:\(slug)" }

    /// The JSON body.
    public var body: [UInt8] {
        var json = JSONText()
        json.member("type", type)
        json.member("title", status.reasonPhrase)
        json.member("status", status.code)
        json.member("detail", detail)
        var bytes = json.finished()
        // Extension members, in a stable order, before the closing brace.
        bytes.removeLast()
        for name in extensions.keys.sorted() {
            bytes.append(UInt8(ascii: ","))
            JSONText.appendString(name, to: &bytes)
            bytes.append(UInt8(ascii: ":"))
            JSONText.appendString(extensions[name] ?? "", to: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// The answer: the status, `Content-Type: application/problem+json` and the body.
    public var answer: HTTPAnswer {
        var fields = HTTPFields()
        fields[.contentType] = "application/problem+json"
        return HTTPAnswer(status: status, fields: fields, body: body)
    }
}
