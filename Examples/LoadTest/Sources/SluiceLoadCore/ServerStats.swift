/// The counters of a `STATS` reply: `OK taps=<n> payments=<n> declines=<n> …`.
public struct ServerStats: Sendable, Hashable, Codable {
    /// Every `name=<integer>` field of the reply.
    public var fields: [String: Int]

    public init(fields: [String: Int]) {
        self.fields = fields
    }

    /// Parses the details of an `OK` reply to `STATS` (everything after `OK `). Fields that are
    /// not `name=<integer>` are ignored; `nil` when there is no counter at all.
    public init?(details: String) {
        var fields: [String: Int] = [:]
        for token in details.split(separator: " ") {
            let pair = token.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, let value = Int(pair[1]) else { continue }
            fields[String(pair[0])] = value
        }
        guard !fields.isEmpty else { return nil }
        self.fields = fields
    }

    /// Processor charges.
    public var payments: Int? { fields["payments"] }
    /// Stored declines.
    public var declines: Int? { fields["declines"] }
}
