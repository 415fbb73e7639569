import Histogram

/// Reply counts per verb and reply kind, and latency histograms per verb: what one client loop
/// records, merged over loops at the end of a run.
///
/// Latencies are in nanoseconds, from the (intended) send time to the reply's arrival, with
/// three significant digits up to 100 s.
public struct LatencyStats: Sendable {
    /// Latency range and precision shared by every histogram, so they can be merged.
    public static let highestTrackableNanoseconds: UInt64 = 100_000_000_000

    /// Replies per `[verb][kind]`.
    public private(set) var counts: [[Int]]
    /// One histogram per verb.
    public private(set) var perVerb: [Histogram<UInt64>]
    /// Requests sent per verb.
    public private(set) var sent: [Int]

    public init() {
        counts = Array(repeating: Array(repeating: 0, count: ReplyKind.allCases.count), count: Verb.allCases.count)
        perVerb = Verb.allCases.map { _ in LatencyStats.makeHistogram() }
        sent = Array(repeating: 0, count: Verb.allCases.count)
    }

    /// A histogram with the shared range and precision.
    public static func makeHistogram() -> Histogram<UInt64> {
        Histogram<UInt64>(
            lowestDiscernibleValue: 1, highestTrackableValue: highestTrackableNanoseconds,
            numberOfSignificantValueDigits: .three)
    }

    /// Counts a request sent.
    public mutating func recordSent(_ verb: Verb) {
        sent[verb.rawValue] += 1
    }

    /// Counts a reply of `kind` to a `verb` request after `latencyNanoseconds`.
    public mutating func record(_ verb: Verb, _ kind: ReplyKind, latencyNanoseconds: Int64) {
        counts[verb.rawValue][kind.rawValue] += 1
        let clamped = UInt64(max(1, min(latencyNanoseconds, Int64(Self.highestTrackableNanoseconds))))
        _ = perVerb[verb.rawValue].record(clamped)
    }

    /// Adds everything `other` recorded.
    public mutating func merge(_ other: LatencyStats) {
        for verb in Verb.allCases {
            for kind in ReplyKind.allCases {
                counts[verb.rawValue][kind.rawValue] += other.counts[verb.rawValue][kind.rawValue]
            }
            perVerb[verb.rawValue].add(other.perVerb[verb.rawValue])
            sent[verb.rawValue] += other.sent[verb.rawValue]
        }
    }

    /// Replies of `kind` to `verb`.
    public func count(_ verb: Verb, _ kind: ReplyKind) -> Int {
        counts[verb.rawValue][kind.rawValue]
    }

    /// Replies to `verb`, all kinds.
    public func replies(to verb: Verb) -> Int { counts[verb.rawValue].reduce(0, +) }

    /// Replies of `kind`, all verbs.
    public func replies(of kind: ReplyKind) -> Int { counts.reduce(0) { $0 + $1[kind.rawValue] } }

    /// All replies.
    public var totalReplies: Int { counts.reduce(0) { $0 + $1.reduce(0, +) } }

    /// All requests sent.
    public var totalSent: Int { sent.reduce(0, +) }

    /// Requests of `verb` sent.
    public func sent(_ verb: Verb) -> Int { sent[verb.rawValue] }

    /// The latencies of every verb together.
    public var overall: Histogram<UInt64> {
        var all = Self.makeHistogram()
        for histogram in perVerb { all.add(histogram) }
        return all
    }
}

/// Latency percentiles of one histogram, in microseconds.
public struct LatencySummary: Sendable, Hashable, Codable {
    public var count: UInt64
    public var p50: Double
    public var p90: Double
    public var p99: Double
    public var p999: Double
    public var max: Double

    /// The percentiles of `histogram` (nanoseconds) in microseconds; all zero when empty.
    public init(_ histogram: Histogram<UInt64>) {
        count = histogram.totalCount
        func micro(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1000 }
        guard count > 0 else {
            p50 = 0; p90 = 0; p99 = 0; p999 = 0; max = 0
            return
        }
        p50 = micro(histogram.valueAtPercentile(50))
        p90 = micro(histogram.valueAtPercentile(90))
        p99 = micro(histogram.valueAtPercentile(99))
        p999 = micro(histogram.valueAtPercentile(99.9))
        max = micro(histogram.max)
    }
}
