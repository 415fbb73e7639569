#if Hummingbird
import HTTPTypes
import Hummingbird
import NIOCore
import SluiceHTTPCodec

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
    /// The header fields stored and replayed, in order: without the hop-by-hop fields (the
    /// server writes its own framing and connection fields for the body it sends) and without
    /// the fields that describe a decision at the time of the first answer (``decisionFields``).
    var fields: [Field]
    /// The body.
    var body: [UInt8]
    /// The ``decisionFields`` of the first answer: sent to the request that ran the chain only,
    /// never stored in a shared store nor replayed (a replay spends no quota, and the limiter's
    /// state then says nothing about it).
    var firstAnswerFields: [Field] = []
    /// Whether the answer is a refusal: by Sluice's own middleware behind the idempotency
    /// middleware, or with a status the options keep no record for (the request's own shape:
    /// validation, authentication, limits). The record is released rather than kept. Never
    /// stored (a refusal is not kept), so not encoded.
    var refusal = false

    private enum CodingKeys: String, CodingKey {
        case status, reason, fields, body
    }

    /// Fields that belong to one connection (RFC 9110, 7.6.1) or to the message's framing, never
    /// stored nor sent from a record (lowercase; and every `proxy-*` field, and the fields a
    /// `Connection` field names).
    static let hopByHopFields: Set<String> = [
        "connection", "keep-alive", "upgrade", "te", "trailer", "transfer-encoding", "content-length",
    ]

    /// Fields about a rate limit's or a throttle's decision when the first answer was made
    /// (lowercase): true of that answer only.
    static let decisionFields: Set<String> = ["ratelimit", "ratelimit-policy", "retry-after"]

    init(status: HTTPResponse.Status, fields: HTTPFields, body: [UInt8]) {
        self.status = status.code
        self.reason = status.reasonPhrase
        let connectionOptions = Set(
            fields[values: .connection].flatMap { $0.split(separator: ",") }
                .map { $0.trimmingSpaces.lowercased() })
        var stored: [Field] = []
        var firstOnly: [Field] = []
        for field in fields {
            let name = field.name.canonicalName
            if Self.hopByHopFields.contains(name) || name.hasPrefix("proxy-") || connectionOptions.contains(name) { continue }
            if Self.decisionFields.contains(name) {
                firstOnly.append(Field(name: field.name.rawName, value: field.value))
            } else {
                stored.append(Field(name: field.name.rawName, value: field.value))
            }
        }
        self.fields = stored
        self.firstAnswerFields = firstOnly
        self.body = body
    }

    /// A stored answer.
    init(answer: HTTPAnswer) {
        self.init(status: answer.status, fields: answer.fields, body: answer.body)
    }

    /// The answer to replay. A record read back from a shared store that does not make a valid
    /// head (it cannot come from this type) becomes a 500.
    var answer: HTTPAnswer {
        answer(with: fields)
    }

    /// The answer to the request that ran the chain: the stored fields and its decision fields.
    var firstAnswer: HTTPAnswer {
        answer(with: fields + firstAnswerFields)
    }

    private func answer(with fields: [Field]) -> HTTPAnswer {
        guard (200...999).contains(status) else { return HTTPAnswer(status: .internalServerError) }
        var headers = HTTPFields()
        for field in fields {
            guard let name = HTTPField.Name(field.name) else { continue }
            headers.append(HTTPField(name: name, value: field.value))
        }
        return HTTPAnswer(status: HTTPResponse.Status(code: status, reasonPhrase: reason), fields: headers, body: body)
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = firstIndex(where: { !isSpace($0) }), let end = lastIndex(where: { !isSpace($0) }) else { return "" }
        return self[start...end]
    }
}
#endif
