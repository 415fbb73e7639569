import Foundation
import SluiceCore

/// Everything a run produced: the merged statistics, the payment ledger, the outcome of the
/// checks, and the renderings (text table, JSON).
public struct LoadResult: Sendable {
    public var configuration: LoadConfiguration
    /// From the first send until the last reply (or the end of the drain timeout).
    public var elapsed: Duration
    public var stats: LatencyStats
    public var ledger: PaymentLedger
    public var outcome: LoadOutcome
    public var checks: [CheckResult]
    /// The first unexpected lines seen, for diagnosis.
    public var samples: [String]

    public init(
        configuration: LoadConfiguration, elapsed: Duration, stats: LatencyStats, ledger: PaymentLedger,
        outcome: LoadOutcome, checks: [CheckResult], samples: [String]
    ) {
        self.configuration = configuration
        self.elapsed = elapsed
        self.stats = stats
        self.ledger = ledger
        self.outcome = outcome
        self.checks = checks
        self.samples = samples
    }

    /// Whether every check passed.
    public var passed: Bool { CorrectnessChecks.allPassed(checks) }

    /// Replies per second over the whole run.
    public var throughput: Double {
        let seconds = Double(elapsed.nanosecondsClamped) / 1e9
        return seconds > 0 ? Double(stats.totalReplies) / seconds : 0
    }

    // MARK: Text

    /// The end-of-run report: a table per verb and status, throughput, latency percentiles and
    /// the checks.
    public var report: String {
        var out = ""
        let c = configuration
        var mode = c.rate.map { "open loop at \(format($0)) req/s" } ?? "closed loop, depth \(c.depth)"
        if c.http {
            mode = "HTTP/1.1 keep-alive, " + mode
            if c.rate != nil { mode += ", depth \(c.depth)" }
            if c.depth > 1 { mode += " (pipelined)" }
        }
        let ports = c.ports.map(String.init).joined(separator: ",")
        out += "sluice-load \(c.host):\(ports)  \(c.connections) connections\(c.ports.count > 1 ? " round-robin over \(c.ports.count) ports" : ""), \(mode), \(c.limit)"
        out += c.rawEcho ? ", raw echo (\(c.lineBytes)-byte lines)\n"
            : c.verbatimEcho ? ", ECHO to a verbatim echo server (\(c.echoBytes)-byte text)\n\n" : ", mix \(c.mix), \(c.keys) keys \(c.keyDistribution), dup-ratio \(c.dupRatio)\n\n"
        out += row(["verb", "status", "count", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs"]) + "\n"
        for verb in Verb.allCases where stats.sent(verb) > 0 || stats.replies(to: verb) > 0 {
            for kind in ReplyKind.allCases where stats.count(verb, kind) > 0 {
                out += row([verb.name, kind.label, "\(stats.count(verb, kind))", "", "", "", "", ""]) + "\n"
            }
            let summary = LatencySummary(stats.perVerb[verb.rawValue])
            out += row([verb.name, "all", "\(summary.count)"] + latencyCells(summary)) + "\n"
        }
        let overall = LatencySummary(stats.overall)
        out += row(["all", "all", "\(overall.count)"] + latencyCells(overall)) + "\n\n"
        out += "sent=\(stats.totalSent) replies=\(stats.totalReplies) elapsed=\(format(Double(elapsed.nanosecondsClamped) / 1e9))s throughput=\(format(throughput)) req/s\n"
        out += "latency µs: p50=\(format(overall.p50)) p90=\(format(overall.p90)) p99=\(format(overall.p99)) p99.9=\(format(overall.p999)) max=\(format(overall.max))\n"
        if outcome.paySent > 0 {
            out += "payments: \(ledger.uniquePairsSent) unique pairs, \(ledger.duplicatesSent) duplicates sent\n"
        }
        if c.ports.count > 1 {
            out += "instances:\n"
            for line in instanceLines { out += "  \(line)\n" }
        }
        if c.http {
            let statuses = outcome.httpStatuses.sorted { (Int($0.key) ?? 0) < (Int($1.key) ?? 0) }
            out += "HTTP statuses: " + (statuses.isEmpty ? "none" : statuses.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
            out += "  reconnects=\(outcome.reconnects)\n"
        }
        out += "\nchecks:\n"
        for check in checks {
            out += "  \(check.passed ? "PASS" : "FAIL")  \(check.name)  (\(check.detail))\n"
        }
        if !samples.isEmpty {
            out += "\nfirst unexpected lines:\n"
            for sample in samples { out += "  \(sample)\n" }
        }
        out += passed ? "\nresult: PASS\n" : "\nresult: FAIL\n"
        return out
    }

    /// One line per instance (port): its connections and what its payment counters grew by.
    private var instanceLines: [String] {
        let c = configuration
        let perPort = c.connectionsPerPort
        return c.ports.enumerated().map { position, port in
            let connections = position < perPort.count ? perPort[position] : 0
            var line = "port \(port): \(connections) connection\(connections == 1 ? "" : "s")"
            guard let probe = outcome.instances.first(where: { $0.port == port }) else { return line }
            if let before = probe.before, let after = probe.after {
                let charges = Self.growth(before.payments, after.payments, http: c.http)
                let declines = Self.growth(before.declines, after.declines, http: true)
                line += ", charges +\(charges.map(String.init) ?? "?") declines +\(declines.map(String.init) ?? "?")"
            } else {
                let probeName = c.http ? "GET /metrics" : "STATS"
                let when = probe.before == nil && probe.after == nil ? "before and after" : probe.before == nil ? "before" : "after"
                line += ", no \(probeName) answer \(when) the run"
            }
            return line
        }
    }

    /// How much a counter grew; over HTTP (and for declines) a counter missing from the page
    /// reads as 0, as in the payment check; `nil` when it is missing from `STATS`.
    static func growth(_ before: Int?, _ after: Int?, http: Bool) -> Int? {
        if http { return (after ?? 0) - (before ?? 0) }
        guard let before, let after else { return nil }
        return after - before
    }

    private func latencyCells(_ summary: LatencySummary) -> [String] {
        [summary.p50, summary.p90, summary.p99, summary.p999, summary.max].map(format)
    }

    private func row(_ cells: [String]) -> String {
        let widths = [7, 18, 10, 9, 9, 9, 9, 10]
        return zip(cells, widths).enumerated().map { index, pair in
            let (cell, width) = pair
            let padding = String(repeating: " ", count: max(0, width - cell.count))
            return index < 2 ? cell + padding : padding + cell
        }.joined(separator: " ")
    }

    // MARK: JSON

    /// The result as a JSON-encodable value.
    public var summary: LoadSummary {
        var perVerb: [LoadSummary.VerbSummary] = []
        for verb in Verb.allCases where stats.sent(verb) > 0 || stats.replies(to: verb) > 0 {
            var statuses: [String: Int] = [:]
            for kind in ReplyKind.allCases where stats.count(verb, kind) > 0 {
                statuses[kind.label] = stats.count(verb, kind)
            }
            perVerb.append(.init(verb: verb.name, sent: stats.sent(verb), statuses: statuses, latencyMicroseconds: LatencySummary(stats.perVerb[verb.rawValue])))
        }
        let c = configuration
        var durationSeconds: Double?
        var requests: Int?
        switch c.limit {
        case .duration(let duration): durationSeconds = Double(duration.nanosecondsClamped) / 1e9
        case .requests(let count): requests = count
        }
        return LoadSummary(
            host: c.host, port: c.port, ports: c.ports, connections: c.connections, depth: c.depth, durationSeconds: durationSeconds,
            requests: requests, mix: c.mix.description, keys: c.keys, keyDistribution: c.keyDistribution.description,
            dupRatio: c.dupRatio, rate: c.rate, rawEcho: c.rawEcho, verbatimEcho: c.verbatimEcho, http: c.http, loops: c.loops,
            elapsedSeconds: Double(elapsed.nanosecondsClamped) / 1e9, sent: stats.totalSent, replies: stats.totalReplies,
            throughput: throughput, latencyMicroseconds: LatencySummary(stats.overall), perVerb: perVerb,
            uniquePayPairs: ledger.uniquePairsSent, duplicatePaysSent: ledger.duplicatesSent,
            statsBefore: outcome.statsBefore, statsAfter: outcome.statsAfter,
            instances: instanceSummaries,
            httpStatuses: c.http ? outcome.httpStatuses : nil, reconnects: c.http ? outcome.reconnects : nil,
            checks: checks, passed: passed)
    }

    /// Each instance's probes and growth, for the JSON.
    private var instanceSummaries: [LoadSummary.InstanceSummary] {
        let perPort = configuration.connectionsPerPort
        return configuration.ports.enumerated().map { position, port in
            let probe = outcome.instances.first { $0.port == port }
            var charges: Int?
            var declines: Int?
            if let before = probe?.before, let after = probe?.after {
                charges = Self.growth(before.payments, after.payments, http: configuration.http)
                declines = Self.growth(before.declines, after.declines, http: true)
            }
            return LoadSummary.InstanceSummary(
                port: port, connections: position < perPort.count ? perPort[position] : 0,
                statsBefore: probe?.before, statsAfter: probe?.after, charges: charges, declines: declines)
        }
    }

    /// The result as pretty-printed JSON.
    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(summary)
    }
}

/// The JSON form of a ``LoadResult`` (what `--json` writes).
public struct LoadSummary: Sendable, Codable, Hashable {
    public struct VerbSummary: Sendable, Codable, Hashable {
        public var verb: String
        public var sent: Int
        public var statuses: [String: Int]
        public var latencyMicroseconds: LatencySummary
    }

    /// One instance's part in the run.
    public struct InstanceSummary: Sendable, Codable, Hashable {
        public var port: Int
        /// Connections that went to this instance.
        public var connections: Int
        public var statsBefore: ServerStats?
        public var statsAfter: ServerStats?
        /// Growth of its `payments` (HTTP: `sluice_payments_total`), when both probes answered.
        public var charges: Int?
        /// Growth of its `declines`, when both probes answered.
        public var declines: Int?
    }

    public var host: String
    /// The first of ``ports`` (the only one, unless several instances were driven).
    public var port: Int
    /// Every port driven, one per instance.
    public var ports: [Int]
    public var connections: Int
    public var depth: Int
    public var durationSeconds: Double?
    public var requests: Int?
    public var mix: String
    public var keys: Int
    public var keyDistribution: String
    public var dupRatio: Double
    public var rate: Double?
    public var rawEcho: Bool
    public var verbatimEcho: Bool
    /// Whether the run spoke HTTP (`--http`).
    public var http: Bool
    public var loops: Int
    public var elapsedSeconds: Double
    public var sent: Int
    public var replies: Int
    public var throughput: Double
    public var latencyMicroseconds: LatencySummary
    public var perVerb: [VerbSummary]
    public var uniquePayPairs: Int
    public var duplicatePaysSent: Int
    /// The counters before the run, summed over the instances (`nil` when one did not answer).
    public var statsBefore: ServerStats?
    /// The counters after the run, summed over the instances (`nil` when one did not answer).
    public var statsAfter: ServerStats?
    /// Per port: its connections, its probes and what its payment counters grew by (no probes
    /// for the echo baselines).
    public var instances: [InstanceSummary]
    /// HTTP: responses per status code.
    public var httpStatuses: [String: Int]?
    /// HTTP: connections reopened after the server closed one.
    public var reconnects: Int?
    public var checks: [CheckResult]
    public var passed: Bool
}

/// A number with at most one decimal for values under 100, none above.
func format(_ value: Double) -> String {
    if value >= 100 || value == value.rounded() { return String(Int(value.rounded())) }
    return String(format: "%.1f", value)
}
