#if Hummingbird
import HTTPTypes
import Hummingbird
import NIOCore
import SluiceHTTP

/// A response as an idempotency record keeps it: the status, the header fields as name/value
/// pairs and the body's bytes. `Codable`, so that a shared store can keep it too.
struct StoredResponse: Sendable, Hashable, Codable {
    /// One header field.
    struct Field: Sendable, Hashable, Codable {
        var name: String
        var value: String
    }

    /// The status code.
    var status: Int
    /// The reason phrase.
    var reason: String
    /// The header fields, in order (without `Content-Length` and `Transfer-Encoding`, which
    /// the server writes for the body it sends).
    var fields: [Field]
    /// The body.
    var body: [UInt8]
    /// Whether the answer is a refusal by Sluice's own middleware behind the idempotency
    /// middleware (the route did not run): the record is released rather than kept. Never
    /// stored (a refusal is not kept), so not encoded.
    var refusal = false

    private enum CodingKeys: String, CodingKey {
        case status, reason, fields, body
    }

    init(status: HTTPResponse.Status, fields: HTTPFields, body: [UInt8]) {
        self.status = status.code
        self.reason = status.reasonPhrase
        self.fields = fields.compactMap { field in
            field.name == .contentLength || field.name == .transferEncoding
                ? nil : Field(name: field.name.rawName, value: field.value)
        }
        self.body = body
    }

    /// A stored answer.
    init(answer: HTTPAnswer) {
        self.init(status: answer.status, fields: answer.fields, body: answer.body)
    }

    /// The answer to send. A record read back from a shared store that does not make a valid
    /// head (it cannot come from this type) becomes a 500.
    var answer: HTTPAnswer {
        guard (200...999).contains(status) else { return HTTPAnswer(status: .internalServerError) }
        var headers = HTTPFields()
        for field in fields {
            guard let name = HTTPField.Name(field.name) else { continue }
            headers.append(HTTPField(name: name, value: field.value))
        }
        return HTTPAnswer(status: HTTPResponse.Status(code: status, reasonPhrase: reason), fields: headers, body: body)
    }
}
#endif
