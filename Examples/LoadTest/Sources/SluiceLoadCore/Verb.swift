/// The request verbs `sluice-load` sends (the line protocol of `sluice-echo`).
public enum Verb: Int, CaseIterable, Sendable, Hashable, Codable, CustomStringConvertible {
    case echo, tap, pay, search

    /// The lower-case name used in `--mix` and in reports.
    public var name: String {
        switch self {
        case .echo: "echo"
        case .tap: "tap"
        case .pay: "pay"
        case .search: "search"
        }
    }

    /// The verb as sent on the wire.
    public var wireName: String { name.uppercased() }

    /// ``wireName`` as bytes, computed once (the request builder's hot path).
    var wireBytes: [UInt8] { Verb.wireBytesTable[rawValue] }
    private static let wireBytesTable: [[UInt8]] = Verb.allCases.map { Array($0.wireName.utf8) }

    public var description: String { name }

    /// The verb named `name` (case-insensitive), if any.
    public init?(name: some StringProtocol) {
        guard let verb = Verb.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = verb
    }
}

/// What kind of reply a request got: the status word (HTTP mode: the status code and problem
/// type, see ``HTTPReplyJudgement``), refined where the details matter for the checks (a
/// replayed payment).
public enum ReplyKind: Int, CaseIterable, Sendable, Hashable, Codable, CustomStringConvertible {
    /// `OK …` (for PAY: a first execution).
    case ok
    /// `OK … replayed=true`: a PAY duplicate that got the stored result.
    case okReplayed
    /// `PONG`.
    case pong
    /// `LIMITED retry-after-ms=<n>` (ECHO over its rate), or `LIMITED policy=<stage> …` (PAY
    /// refused by a limit of the server's payment chain).
    case limited
    /// `THROTTLED retry-after-ms=<n>` (TAP inside its window).
    case throttled
    /// `DECLINED …` (a first execution declined).
    case declined
    /// `DECLINED … replayed=true`.
    case declinedReplayed
    /// `MISMATCH` (same key and idem, another amount).
    case mismatch
    /// `CANCELLED`.
    case cancelled
    /// `SUPERSEDED` (a newer SEARCH for the key replaced this one).
    case superseded
    /// `ERR <code>` (HTTP: a 4xx or 5xx the route does not answer legitimately).
    case error
    /// Any other status word (HTTP: a status no route answers, such as a 1xx or a 3xx).
    case unknown
    /// HTTP `409 conflict`: a PAY duplicate that arrived while the first request of its
    /// (key, Idempotency-Key) pair ran.
    case conflict
    /// HTTP `503 busy`: a table or a quota is full (the line protocol's `ERR busy`, which the
    /// line mode counts as `ERR`).
    case busy

    /// The label used in reports.
    public var label: String {
        switch self {
        case .ok: "OK"
        case .okReplayed: "OK replayed"
        case .pong: "PONG"
        case .limited: "LIMITED"
        case .throttled: "THROTTLED"
        case .declined: "DECLINED"
        case .declinedReplayed: "DECLINED replayed"
        case .mismatch: "MISMATCH"
        case .cancelled: "CANCELLED"
        case .superseded: "SUPERSEDED"
        case .error: "ERR"
        case .unknown: "unknown"
        case .conflict: "CONFLICT"
        case .busy: "BUSY"
        }
    }

    public var description: String { label }

    /// Whether this reply is one the protocol allows for `verb` when the client sends only
    /// well-formed requests and never reuses an idem key with another amount.
    public func isExpected(for verb: Verb) -> Bool {
        switch (verb, self) {
        case (.echo, .ok), (.echo, .limited): true
        case (.tap, .ok), (.tap, .throttled): true
        case (.pay, .ok), (.pay, .okReplayed), (.pay, .declined), (.pay, .declinedReplayed), (.pay, .cancelled), (.pay, .conflict): true
        // A limit of the server's payment chain (`--pay-rate`, `--pay-concurrency`).
        case (.pay, .limited): true
        case (.search, .ok), (.search, .superseded), (.search, .cancelled): true
        default: false
        }
    }
}
