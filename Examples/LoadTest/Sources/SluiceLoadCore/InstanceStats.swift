/// The `STATS` probes (HTTP: `GET /metrics`) of one `sluice-echo` instance, before and after a
/// run: what the payment check reads that instance's charges and declines from.
public struct InstanceStats: Sendable, Hashable, Codable {
    /// The instance's port (one of ``LoadConfiguration/ports``).
    public var port: Int
    /// The counters before the run; `nil` when the instance did not answer the probe.
    public var before: ServerStats?
    /// The counters after the run; `nil` when the instance did not answer the probe.
    public var after: ServerStats?

    public init(port: Int, before: ServerStats? = nil, after: ServerStats? = nil) {
        self.port = port
        self.before = before
        self.after = after
    }
}
