import HTTPTypes
import RawStructuredFieldValues

/// The `Idempotency-Key` request header field (draft-ietf-httpapi-idempotency-key-header): a
/// structured-field string (`"8e03978e-40d5"`), or a bare token for clients that send one
/// unquoted; 1–255 characters.
public enum IdempotencyKeyField {
    /// The longest key accepted, in characters.
    public static let maximumLength = 255

    /// The key in `value`, or a problem (400) saying why it is not one.
    public static func parse(_ value: String?) -> Result<String, HTTPProblem> {
        guard let value else {
            return .failure(HTTPProblem(.badRequest, "missing-idempotency-key", detail: "this request needs an Idempotency-Key header field"))
        }
        let bad = HTTPProblem(
            .badRequest, "bad-idempotency-key",
            detail: "Idempotency-Key must be a structured-field string of 1 to \(maximumLength) characters")
        var parser = StructuredFieldValueParser(Array(value.utf8))
        if let item = try? parser.parseItemFieldValue() {
            switch item.rfc9651BareItem {
            case .string(let text), .token(let text):
                guard (1...maximumLength).contains(text.utf8.count) else { return .failure(bad) }
                return .success(text)
            default:
                break
            }
        }
        // A bare value that is not an sf-token (it starts with a digit, say) is taken as it is
        // if it is one run of visible ASCII without quotes, commas or semicolons (never a list
        // or a string gone wrong).
        let key = value.trimmed
        guard (1...maximumLength).contains(key.utf8.count),
            key.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: ";") })
        else { return .failure(bad) }
        return .success(key)
    }
}

extension String {
    fileprivate var trimmed: String {
        let utf8 = self.utf8
        guard let first = utf8.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }),
            let last = utf8.lastIndex(where: { $0 != 0x20 && $0 != 0x09 })
        else { return "" }
        return String(self[first...last])
    }
}
