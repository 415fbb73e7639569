/// How the HTTP mode judges one response to one request: the ``ReplyKind`` it counts as, and
/// whether it is a legitimate answer, a legitimate refusal, an error, or a contradiction of the
/// request.
///
/// | request | legitimate answers |
/// | --- | --- |
/// | ECHO (`POST /echo`) | 200 with the body sent · 429 `limited` |
/// | TAP (`POST /tap/<key>`) | 200 `{"tap": <n>}` · 429 `throttled` |
/// | PAY (`POST /pay`) | 201 `{"charge": "<cid>", "amount": <n>}` · 402 `payment-declined` · either with `Idempotent-Replayed: true` · 409 `conflict` · 429 `limited` (a limit of the server's payment chain) |
/// | SEARCH (`GET /search/<key>?q=`) | 200 `{"results": "<query>"}` · 409 `superseded` · 409 `cancelled` |
/// | any | 503 `busy` (counted apart, as the line mode's `ERR busy`) |
///
/// A refusal status must carry its problem type (`urn:sluice:problem:<slug>`): a 402, 409 or
/// 429 with another type is not the refusal the contract names, and a 503 other than `busy`
/// (`shutting-down`, `too-many-connections`) is an error. Any other 4xx or 5xx is an
/// error (`422 mismatch` included: the amounts of a pair never change); a 1xx, 3xx or another
/// 2xx is a status the route never answers.
public struct HTTPReplyJudgement: Sendable, Hashable {
    /// What the request expected, beyond its verb.
    public enum Expectation: Sendable, Hashable {
        /// ECHO: the body sent, to come back as it is.
        case echo(body: [UInt8])
        /// TAP.
        case tap
        /// PAY: the amount sent.
        case pay(amount: UInt64)
        /// SEARCH: the query sent (before percent-encoding).
        case search(query: [UInt8])

        /// The verb of the request.
        public var verb: Verb {
            switch self {
            case .echo: .echo
            case .tap: .tap
            case .pay: .pay
            case .search: .search
            }
        }
    }

    /// What the response is, for the checks.
    public enum Verdict: Sendable, Hashable {
        /// A legitimate answer or refusal.
        case accepted
        /// `503 busy`: a legitimate refusal, counted apart.
        case busy
        /// An error status (4xx or 5xx) the route does not answer legitimately.
        case errorStatus
        /// A status the route never answers, or a refusal without its problem type.
        case unexpected(String)
        /// A legitimate status whose content contradicts the request.
        case mismatched(String)
    }

    /// The kind the response is counted as.
    public var kind: ReplyKind
    /// What it is for the checks.
    public var verdict: Verdict
    /// PAY 201: the charge id.
    public var charge: String?

    public init(kind: ReplyKind, verdict: Verdict, charge: String? = nil) {
        self.kind = kind
        self.verdict = verdict
        self.charge = charge
    }

    /// Judges `response` to a request that expected `expectation`.
    public static func judge(_ response: HTTPResponseView, expecting expectation: Expectation) -> HTTPReplyJudgement {
        let status = response.status
        switch (status, expectation) {
        case (503, _):
            // 503 is also `shutting-down` and `too-many-connections`: errors for a load run.
            guard problemType(response) == "urn:sluice:problem:busy" else {
                return HTTPReplyJudgement(kind: .error, verdict: .errorStatus)
            }
            return HTTPReplyJudgement(kind: .busy, verdict: .busy)
        case (200, .echo(let body)):
            let same = body.withUnsafeBytes { bytesEqual(response.body, $0) }
            return HTTPReplyJudgement(kind: .ok, verdict: same ? .accepted : .mismatched("the echoed body differs"))
        case (429, .echo):
            return refusal(response, .limited, slug: "limited")
        case (200, .tap):
            guard let taps = JSONMembers.integer("tap", in: response.body), taps >= 0 else {
                return HTTPReplyJudgement(kind: .ok, verdict: .mismatched("no \"tap\" count"))
            }
            return HTTPReplyJudgement(kind: .ok, verdict: .accepted)
        case (429, .tap):
            return refusal(response, .throttled, slug: "throttled")
        case (201, .pay(let amount)):
            let kind: ReplyKind = replayed(response) ? .okReplayed : .ok
            guard let charge = JSONMembers.string("charge", in: response.body), !charge.isEmpty else {
                return HTTPReplyJudgement(kind: kind, verdict: .mismatched("no \"charge\" id"))
            }
            guard let charged = JSONMembers.integer("amount", in: response.body), charged >= 0, UInt64(charged) == amount else {
                return HTTPReplyJudgement(kind: kind, verdict: .mismatched("the \"amount\" differs from \(amount)"), charge: charge)
            }
            return HTTPReplyJudgement(kind: kind, verdict: .accepted, charge: charge)
        case (429, .pay):
            // A limit of the payment's chain (`--pay-rate`, `--pay-concurrency`) refused it.
            return refusal(response, .limited, slug: "limited")
        case (402, .pay):
            return refusal(response, replayed(response) ? .declinedReplayed : .declined, slug: "payment-declined")
        case (409, .pay):
            return refusal(response, .conflict, slug: "conflict")
        case (422, .pay):
            return HTTPReplyJudgement(kind: .mismatch, verdict: .errorStatus)
        case (200, .search(let query)):
            guard let results = JSONMembers.string("results", in: response.body) else {
                return HTTPReplyJudgement(kind: .ok, verdict: .mismatched("no \"results\""))
            }
            let same = results.utf8.elementsEqual(query)
            return HTTPReplyJudgement(kind: .ok, verdict: same ? .accepted : .mismatched("\"results\" differ from the query"))
        case (409, .search):
            // `cancelled`: the search was already running when a newer one replaced it (the
            // line protocol's CANCELLED, which the line mode accepts too). The contract names
            // only `superseded` for this route.
            if problemType(response) == "urn:sluice:problem:cancelled" {
                return HTTPReplyJudgement(kind: .cancelled, verdict: .accepted)
            }
            return refusal(response, .superseded, slug: "superseded")
        case (400...599, _):
            return HTTPReplyJudgement(kind: .error, verdict: .errorStatus)
        default:
            return HTTPReplyJudgement(kind: .unknown, verdict: .unexpected("status \(status) to \(expectation.verb.wireName)"))
        }
    }

    /// A refusal status: `kind` when the problem type is `slug`, unexpected otherwise.
    private static func refusal(_ response: HTTPResponseView, _ kind: ReplyKind, slug: String) -> HTTPReplyJudgement {
        let type = problemType(response)
        guard type == "urn:sluice:problem:" + slug else {
            return HTTPReplyJudgement(
                kind: kind, verdict: .unexpected("status \(response.status) with problem type \(type.map { "\"\($0)\"" } ?? "none"), not \(slug)"))
        }
        return HTTPReplyJudgement(kind: kind, verdict: .accepted)
    }

    /// The `type` of a problem body (`application/problem+json`), if there is one.
    public static func problemType(_ response: HTTPResponseView) -> String? {
        JSONMembers.string("type", in: response.body)
    }

    /// Whether the response is a replay: `Idempotent-Replayed: true`.
    private static func replayed(_ response: HTTPResponseView) -> Bool {
        response.field("idempotent-replayed", is: "true")
    }
}
