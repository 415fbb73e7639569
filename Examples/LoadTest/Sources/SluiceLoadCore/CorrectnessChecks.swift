/// The facts a run's correctness checks look at, gathered over every connection.
public struct LoadOutcome: Sendable, Hashable, Codable {
    /// Whether the run spoke HTTP (`--http`); the checks are named for its statuses then.
    public var http = false
    /// Requests sent.
    public var sent = 0
    /// Replies matched to a request in flight.
    public var replies = 0
    /// Replies whose id matched no request in flight (unknown, unreadable, or answered twice).
    public var unmatchedReplies = 0
    /// Requests still without a reply when the run ended.
    public var missingReplies = 0
    /// `- ERR …` lines (replies to lines without a readable id).
    public var connectionErrors = 0
    /// `<id> ERR …` replies, `ERR busy` aside (HTTP: 4xx and 5xx statuses the route does not
    /// answer legitimately).
    public var errorReplies = 0
    /// `<id> ERR busy` replies (HTTP: `503 busy`): a refusal the protocol allows (a table or a
    /// quota is full, as a hot account's payments meet their per-key quota); nothing ran for
    /// them.
    public var busyReplies = 0
    /// Replies with a status the protocol does not allow for their verb (other than ERR); HTTP:
    /// also malformed responses and refusals without their problem type.
    public var unexpectedReplies = 0
    /// Replies whose content contradicts their request (ECHO text, SEARCH query, raw echo line).
    public var badReplies = 0
    /// Connections the server closed (or that failed) before the run ended. HTTP: connections
    /// lost with requests outstanding, or that could not reconnect (a close announced by
    /// `Connection: close`, or of an idle connection, is not one).
    public var connectionsClosedEarly = 0
    /// HTTP: new connections opened after the server closed one (`Connection: close`, or an idle
    /// connection closed).
    public var reconnects = 0
    /// HTTP: responses per status code.
    public var httpStatuses: [String: Int] = [:]
    /// PAY requests sent (fresh and duplicates).
    public var paySent = 0
    /// (key, idem) pairs sent for the first time.
    public var uniquePairs = 0
    /// Pairs that got at least one OK reply (HTTP: 201, a charge id): the charges `STATS`
    /// (HTTP: `sluice_payments_total`) must show.
    public var chargedPairs = 0
    /// Pairs answered DECLINED (HTTP: 402): the declines `STATS` (HTTP:
    /// `sluice_declines_total`) must show. None, as the amounts sent never decline.
    public var declinedPairs = 0
    /// Pairs whose replies named two different charge ids, or both a charge and a decline.
    public var conflictingPairs = 0
    /// `STATS` (HTTP: `GET /metrics`) before and after the run, one entry per instance (per
    /// port), in the order of the ports; empty when nothing was probed (the echo baselines).
    public var instances: [InstanceStats] = []

    /// The counters before the run summed over ``instances`` (the one instance's when a single
    /// port is driven); `nil` when an instance did not answer or none was probed.
    public var statsBefore: ServerStats? { Self.summed(instances.map(\.before)) }
    /// The counters after the run summed over ``instances``; `nil` when an instance did not
    /// answer or none was probed.
    public var statsAfter: ServerStats? { Self.summed(instances.map(\.after)) }

    private static func summed(_ stats: [ServerStats?]) -> ServerStats? {
        guard !stats.isEmpty else { return nil }
        var present: [ServerStats] = []
        for each in stats {
            guard let each else { return nil }
            present.append(each)
        }
        return ServerStats.summed(present)
    }

    public init() {}
}

/// One correctness check and its verdict.
public struct CheckResult: Sendable, Hashable, Codable {
    public var name: String
    public var passed: Bool
    public var detail: String

    public init(name: String, passed: Bool, detail: String) {
        self.name = name
        self.passed = passed
        self.detail = detail
    }
}

/// The correctness checks of a load run: every request got exactly one reply, PAY charges (from
/// `STATS`, or `GET /metrics` over HTTP, summed over the instances of ``LoadOutcome/instances``)
/// equal the (key, idem) pairs answered with a charge, no unexpected `ERR` (HTTP: error status);
/// plus replies that match their requests, only statuses the protocol allows, and connections
/// that stayed open.
public enum CorrectnessChecks {
    /// Evaluates every check that applies to `outcome`.
    public static func evaluate(_ outcome: LoadOutcome) -> [CheckResult] {
        var results: [CheckResult] = []

        let exactlyOnce = outcome.replies == outcome.sent && outcome.unmatchedReplies == 0 && outcome.missingReplies == 0
        results.append(
            CheckResult(
                name: "every request got exactly one reply", passed: exactlyOnce,
                detail: "sent=\(outcome.sent) replied=\(outcome.replies) missing=\(outcome.missingReplies) unmatched=\(outcome.unmatchedReplies)"
            ))

        if outcome.http {
            results.append(
                CheckResult(
                    name: "no unexpected error status", passed: outcome.errorReplies == 0,
                    detail: "4xx/5xx other than the refusals=\(outcome.errorReplies) 503 busy=\(outcome.busyReplies)"))
        } else {
            results.append(
                CheckResult(
                    name: "no unexpected ERR", passed: outcome.errorReplies == 0 && outcome.connectionErrors == 0,
                    detail: "ERR replies=\(outcome.errorReplies) '- ERR' lines=\(outcome.connectionErrors)"))
        }

        results.append(
            CheckResult(
                name: "only statuses the protocol allows", passed: outcome.unexpectedReplies == 0,
                detail: "unexpected=\(outcome.unexpectedReplies)"))

        results.append(
            CheckResult(
                name: "replies match their requests", passed: outcome.badReplies == 0,
                detail: "mismatched=\(outcome.badReplies)"))

        if outcome.http {
            results.append(
                CheckResult(
                    name: "no connection lost with requests outstanding", passed: outcome.connectionsClosedEarly == 0,
                    detail: "lost=\(outcome.connectionsClosedEarly) reconnects=\(outcome.reconnects)"))
        } else {
            results.append(
                CheckResult(
                    name: "connections stayed open", passed: outcome.connectionsClosedEarly == 0,
                    detail: "closed early=\(outcome.connectionsClosedEarly)"))
        }

        if outcome.paySent > 0 {
            results.append(paymentCheck(outcome))
        }
        return results
    }

    /// Whether every check passed.
    public static func allPassed(_ results: [CheckResult]) -> Bool {
        results.allSatisfy(\.passed)
    }

    private static func paymentCheck(_ outcome: LoadOutcome) -> CheckResult {
        let name = outcome.http
            ? "PAY charges (/metrics) = (key, Idempotency-Key) pairs answered 201"
            : "PAY charges (STATS) = (key, idem) pairs answered OK"
        let growth: PaymentGrowth
        do {
            growth = try PaymentGrowth(probes: outcome.instances, http: outcome.http)
        } catch {
            return CheckResult(name: name, passed: false, detail: error.description)
        }
        let charged = growth.charges
        let declined = growth.declines
        // Several instances: each one's share, so a lopsided or silent instance shows.
        var perInstance = ""
        if growth.instances.count > 1 {
            perInstance = " (" + growth.instances.map { "\($0.port): \($0.charges)" }.joined(separator: ", ") + ")"
        }
        let notes = growth.notes.isEmpty ? "" : " (" + growth.notes.joined(separator: "; ") + ")"
        let passed = charged == outcome.chargedPairs && declined == outcome.declinedPairs && outcome.conflictingPairs == 0
        let answered = outcome.http ? "pairs answered 201" : "pairs answered OK"
        return CheckResult(
            name: name, passed: passed,
            detail: "charges=\(charged)\(perInstance) \(answered)=\(outcome.chargedPairs) unique pairs=\(outcome.uniquePairs) declines=\(declined) pairs declined=\(outcome.declinedPairs) pairs with two answers=\(outcome.conflictingPairs) PAYs sent=\(outcome.paySent)\(notes)"
        )
    }
}
