/// The facts a run's correctness checks look at, gathered over every connection.
public struct LoadOutcome: Sendable, Hashable, Codable {
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
    /// `<id> ERR …` replies, `ERR busy` aside.
    public var errorReplies = 0
    /// `<id> ERR busy` replies: a refusal the protocol allows (a table or a quota is full, as a
    /// hot account's payments meet their per-key quota); nothing ran for them.
    public var busyReplies = 0
    /// Replies with a status the protocol does not allow for their verb (other than ERR).
    public var unexpectedReplies = 0
    /// Replies whose content contradicts their request (ECHO text, SEARCH query, raw echo line).
    public var badReplies = 0
    /// Connections the server closed (or that failed) before the run ended.
    public var connectionsClosedEarly = 0
    /// PAY requests sent (fresh and duplicates).
    public var paySent = 0
    /// (key, idem) pairs sent for the first time.
    public var uniquePairs = 0
    /// Pairs that got at least one OK reply (a charge id): the charges `STATS` must show.
    public var chargedPairs = 0
    /// Pairs whose OK replies named two different charge ids.
    public var conflictingPairs = 0
    /// `STATS` before and after the run (protocol mode, when the server answers it).
    public var statsBefore: ServerStats?
    public var statsAfter: ServerStats?

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
/// `STATS`) equal the unique (key, idem) pairs sent, no unexpected `ERR`; plus replies that
/// match their requests, only statuses the protocol allows, and connections that stayed open.
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

        results.append(
            CheckResult(
                name: "no unexpected ERR", passed: outcome.errorReplies == 0 && outcome.connectionErrors == 0,
                detail: "ERR replies=\(outcome.errorReplies) '- ERR' lines=\(outcome.connectionErrors)"))

        results.append(
            CheckResult(
                name: "only statuses the protocol allows", passed: outcome.unexpectedReplies == 0,
                detail: "unexpected=\(outcome.unexpectedReplies)"))

        results.append(
            CheckResult(
                name: "replies match their requests", passed: outcome.badReplies == 0,
                detail: "mismatched=\(outcome.badReplies)"))

        results.append(
            CheckResult(
                name: "connections stayed open", passed: outcome.connectionsClosedEarly == 0,
                detail: "closed early=\(outcome.connectionsClosedEarly)"))

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
        let name = "PAY charges (STATS) = (key, idem) pairs answered OK"
        guard let before = outcome.statsBefore?.payments, let after = outcome.statsAfter?.payments else {
            return CheckResult(name: name, passed: false, detail: "the server did not report payments= in STATS")
        }
        let charged = after - before
        let declined = (outcome.statsAfter?.declines ?? 0) - (outcome.statsBefore?.declines ?? 0)
        let passed = charged == outcome.chargedPairs && declined == 0 && outcome.conflictingPairs == 0
        return CheckResult(
            name: name, passed: passed,
            detail: "charges=\(charged) pairs answered OK=\(outcome.chargedPairs) unique pairs=\(outcome.uniquePairs) declines=\(declined) pairs with two charge ids=\(outcome.conflictingPairs) PAYs sent=\(outcome.paySent)"
        )
    }
}
