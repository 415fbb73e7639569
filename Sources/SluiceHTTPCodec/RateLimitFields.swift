import HTTPTypes
import SluiceCore

/// The `RateLimit-Policy` and `RateLimit` header fields of draft-ietf-httpapi-ratelimit-headers
/// (draft 11), both structured-field lists of one item named by the policy:
/// `RateLimit-Policy: "tap";q=1;w=1` (quota `q` per window of `w` seconds) and
/// `RateLimit: "tap";r=0;t=1` (`r` units remaining, `t` seconds until the quota is back).
public struct RateLimitFields: Sendable, Hashable {
    /// The policy's name: an sf-string item, 1–64 characters of `a–z 0–9 _ - .`.
    public let name: String
    /// The quota: units per window.
    public let quota: Int
    /// The window, in whole seconds (at least 1).
    public let windowSeconds: Int
    /// The `RateLimit-Policy` value, made once.
    public let policyValue: String

    /// The fields of policy `name`: `quota` units per `window` (rounded up to whole seconds,
    /// at least 1).
    ///
    /// - Precondition: `name` is 1–64 characters of `a–z 0–9 _ - .`, `quota` at least 1.
    public init(name: String, quota: Int, window: Duration) {
        precondition(PolicyName.isValid(name), "a policy name is 1-64 characters of a-z 0-9 _ - .")
        precondition(quota >= 1, "a quota is at least 1")
        self.name = name
        self.quota = quota
        self.windowSeconds = max(1, Self.wholeSeconds(window))
        self.policyValue = "\"\(name)\";q=\(quota);w=\(windowSeconds)"
    }

    /// The fields of a throttle: one request per `window`.
    public static func throttle(name: String, window: Duration) -> RateLimitFields {
        RateLimitFields(name: name, quota: 1, window: window)
    }

    /// The fields of a GCRA limit: `q` is its limit (burst + 1) and `w` the time an empty
    /// bucket takes to fill (the limit times the emission interval, `period / count`).
    public static func gcra(name: String, options: RateLimitOptions) -> RateLimitFields {
        let fill = options.period * options.limit / options.count
        return RateLimitFields(name: name, quota: options.limit, window: fill)
    }

    /// The `RateLimit` value: `remaining` units, the quota back after `reset`.
    public func limitValue(remaining: Int, reset: Duration) -> String {
        "\"\(name)\";r=\(max(0, remaining));t=\(Self.wholeSeconds(reset))"
    }

    /// Adds `RateLimit-Policy` and `RateLimit` to `fields`.
    public func add(to fields: inout HTTPFields, remaining: Int, reset: Duration) {
        fields[.rateLimitPolicy] = policyValue
        fields[.rateLimit] = limitValue(remaining: remaining, reset: reset)
    }

    /// `duration` in whole seconds, rounded up (a client that waits this long is in time).
    public static func wholeSeconds(_ duration: Duration) -> Int {
        let nanoseconds = duration.nanosecondsClamped
        guard nanoseconds > 0 else { return 0 }
        return Int(nanoseconds / 1_000_000_000 + (nanoseconds % 1_000_000_000 == 0 ? 0 : 1))
    }
}

extension HTTPField.Name {
    /// `RateLimit` (draft-ietf-httpapi-ratelimit-headers).
    public static let rateLimit = HTTPField.Name(token: "RateLimit")
    /// `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers).
    public static let rateLimitPolicy = HTTPField.Name(token: "RateLimit-Policy")
    /// `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header).
    public static let idempotencyKey = HTTPField.Name(token: "Idempotency-Key")
    /// `Idempotent-Replayed: true` on an answer replayed from an idempotency record.
    public static let idempotentReplayed = HTTPField.Name(token: "Idempotent-Replayed")
    /// `Sluice-Guarantee: local` on an answer this instance decided alone because its shared
    /// store did not answer (the store's `local` failure mode).
    public static let sluiceGuarantee = HTTPField.Name(token: "Sluice-Guarantee")

    /// The name `token`, a literal of this file: a valid field name by construction (the tests
    /// read each back), so the failable initializer's `nil` is not a case a request can reach.
    private init(token: StaticString) {
        guard let name = HTTPField.Name(token.description) else {
            preconditionFailure("\(token) is not an HTTP field-name token")
        }
        self = name
    }
}
