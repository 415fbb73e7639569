#if Hummingbird
import Sluice

/// How an ``IdempotencyRule`` keeps its records and bounds the bodies it reads and stores.
public struct IdempotencyMiddlewareOptions: Sendable, Hashable {
    /// How long a completed response is kept and replayed.
    public var retention: Duration
    /// How long the first request owns its record before another may take it over (on a shared
    /// store, it renews the lease while it runs).
    public var lease: Duration
    /// What a duplicate gets while the first request still runs: 409 (`.reject`) or, with
    /// `.join`, the first request's response when it completes (marked replayed).
    public var concurrent: IdempotencyOptions.Concurrent
    /// Whether a governed request without `Idempotency-Key` is refused (400
    /// `missing-idempotency-key`) or passes through as a plain request.
    public var required: Bool
    /// The largest request body read, in bytes: its digest is the record's fingerprint, and the
    /// rest of the chain gets it collected. A larger body is answered 413 and nothing runs.
    public var requestBodyLimit: Int
    /// The largest response body stored, in bytes. A response over it is not kept: the record
    /// keeps (and every caller, the first one too, gets) a 500 `response-not-stored` problem
    /// saying so; the request ran once and is never run again for this key.
    ///
    /// It also sizes the records: the rule's default budget counts each record at its largest,
    /// `storedBodyLimit` + 1 KiB of head (and about 100 bytes for the key's entry), so that the
    /// records kept can never outgrow it. The capacity of a budget is budget ÷ that: 256 MiB
    /// (the default budget) holds about 51,000 records with the `.payment` preset's 4 KiB, about
    /// 4,000 with 64 KiB. A new record past the capacity is refused (503 `busy`) until records
    /// expire: raise the budget with the limit.
    public var storedBodyLimit: Int
    /// New records one key may open back to back, and as many more per `retention` (past that,
    /// 503 `busy`); `nil` sets no quota. A record released because Sluice's own rate limit or
    /// throttle behind the middleware refused the request (the route did not run) costs none.
    public var recordsPerKey: Int?
    /// Statuses that say the request was refused for its own shape before the route did its
    /// work (validation, authentication, limits): such a response is passed on but not stored,
    /// and its record is released, so that the corrected retry runs (Stripe saves nothing for a
    /// request that failed validation). A route that acts and then answers one of these would
    /// run again on retry: validate before acting, or remove the status from the set.
    public var unstoredStatuses: Set<Int>
    /// How a request body counts in the record's fingerprint.
    public var fingerprint: Fingerprint

    /// How a request body counts in a record's fingerprint: a retry with another body is a
    /// mismatch (422).
    public enum Fingerprint: Sendable, Hashable {
        /// A JSON body (`Content-Type: application/json` or `…+json`) counts by its canonical
        /// form: the order of an object's members, whitespace and how strings are escaped do
        /// not matter, as Stripe compares parameters. Any other body (or JSON with a repeated
        /// member name, or not strict JSON) counts by its bytes.
        case canonicalJSON
        /// Every body counts by its bytes.
        case exactBytes
    }

    /// The statuses a route's middleware answers a request's own shape with, not stored by
    /// default: 400, 401, 403, 404, 405, 406, 411, 413, 414, 415, 422, 428, 429 and 431.
    public static let requestShapeStatuses: Set<Int> = [400, 401, 403, 404, 405, 406, 411, 413, 414, 415, 422, 428, 429, 431]

    /// Options, validated by ``IdempotencyRule/init(name:options:store:budget:in:)``.
    public init(
        retention: Duration, lease: Duration, concurrent: IdempotencyOptions.Concurrent, required: Bool,
        requestBodyLimit: Int, storedBodyLimit: Int, recordsPerKey: Int?,
        unstoredStatuses: Set<Int> = IdempotencyMiddlewareOptions.requestShapeStatuses,
        fingerprint: Fingerprint = .canonicalJSON
    ) {
        self.retention = retention
        self.lease = lease
        self.concurrent = concurrent
        self.required = required
        self.requestBodyLimit = requestBodyLimit
        self.storedBodyLimit = storedBodyLimit
        self.recordsPerKey = recordsPerKey
        self.unstoredStatuses = unstoredStatuses
        self.fingerprint = fingerprint
    }

    /// Payments: the key is required, records are kept 24 hours with a 30 s lease, a duplicate
    /// in flight gets 409, request bodies up to 64 KiB, stored response bodies up to 4 KiB (a
    /// payment's answer: an id and a status), 100 new records per key per retention. With the
    /// rule's default budget (256 MiB) that holds about 51,000 records: a day of 35 new
    /// payments a minute.
    public static let payment = IdempotencyMiddlewareOptions(
        retention: .seconds(24 * 60 * 60), lease: .seconds(30), concurrent: .reject, required: true,
        requestBodyLimit: 64 << 10, storedBodyLimit: 4 << 10, recordsPerKey: 100)

    /// As ``payment``, but a request without `Idempotency-Key` passes through un-deduplicated
    /// (the key is the client's opt-in, as on most APIs' `POST`s).
    public static let optionalKey: IdempotencyMiddlewareOptions = {
        var options = payment
        options.required = false
        return options
    }()

    /// The gate's options for the rule's records.
    func idempotencyOptions() throws(SluiceError) -> IdempotencyOptions {
        guard requestBodyLimit >= 0, storedBodyLimit >= 0 else {
            throw SluiceError(
                code: .invalidOption, message: "body limits are at least 0 bytes",
                value: "request \(requestBodyLimit), stored \(storedBodyLimit)")
        }
        // The chain never fails once it has started (a thrown error is kept as a 500 problem);
        // the only outputs counted as failures, and so released, are refusals by Sluice's own
        // middleware behind the idempotency middleware (the route did not run).
        return try IdempotencyOptions(
            retention: retention, lease: lease, concurrent: concurrent, cacheErrors: false, recordsPerKey: recordsPerKey)
    }
}
#endif
