/// The counters of a `STATS` reply (`OK taps=<n> payments=<n> declines=<n> …`), or of a
/// `GET /metrics` page in HTTP mode (`sluice_payments_total`, `sluice_declines_total`, …).
public struct ServerStats: Sendable, Hashable, Codable {
    /// Every counter: the `name=<integer>` fields of a `STATS` reply, or the `sluice_<name>_total`
    /// totals of a metrics page.
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

    /// Parses a Prometheus page (`GET /metrics`): every `sluice_<name>_total` metric, summed
    /// over its label sets, becomes the field `<name>` when its total is a whole number
    /// (`sluice_payments_total` → ``payments``, `sluice_declines_total` → ``declines``). A
    /// counter nothing has incremented may be missing from the page: its field is then absent.
    public init(metrics text: String) {
        var fields: [String: Int] = [:]
        for (name, total) in PrometheusText.totals(text) where name.hasPrefix("sluice_") && name.hasSuffix("_total") {
            let field = String(name.dropFirst("sluice_".count).dropLast("_total".count))
            guard !field.isEmpty, total == total.rounded(), abs(total) < 9e15 else { continue }
            fields[field] = Int(total)
        }
        self.fields = fields
    }

    /// The counters of several instances added up, field by field (a field one of them lacks
    /// counts as 0 there).
    public static func summed(_ stats: [ServerStats]) -> ServerStats {
        var fields: [String: Int] = [:]
        for each in stats { fields.merge(each.fields, uniquingKeysWith: +) }
        return ServerStats(fields: fields)
    }

    /// Processor charges.
    public var payments: Int? { fields["payments"] }
    /// Stored declines.
    public var declines: Int? { fields["declines"] }
}
