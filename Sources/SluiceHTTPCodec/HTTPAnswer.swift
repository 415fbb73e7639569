import HTTPTypes

/// What a front sends back for one request: a status, header fields and a body, in the types
/// of swift-http-types so that any HTTP server (Sluice's own HTTP front, framework middleware) can
/// write it.
public struct HTTPAnswer: Sendable, Hashable {
    /// The status.
    public var status: HTTPResponse.Status
    /// The header fields (`Content-Length` is the server's to add).
    public var fields: HTTPFields
    /// The body.
    public var body: [UInt8]

    /// An answer.
    public init(status: HTTPResponse.Status, fields: HTTPFields = HTTPFields(), body: [UInt8] = []) {
        self.status = status
        self.fields = fields
        self.body = body
    }

    /// A JSON answer (`Content-Type: application/json`).
    public static func json(_ status: HTTPResponse.Status, _ body: [UInt8]) -> HTTPAnswer {
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        return HTTPAnswer(status: status, fields: fields, body: body)
    }

    /// The response head.
    public var response: HTTPResponse { HTTPResponse(status: status, headerFields: fields) }
}
