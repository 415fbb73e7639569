/// How much the payment counters grew over a run, per instance and summed over the instances:
/// what the payment check compares with the (key, idem) pairs answered. The instances share one
/// store, so each pair is charged by one of them only, and each counts the charges it made: the
/// sum over the instances is the run's charges.
public struct PaymentGrowth: Sendable, Hashable, Codable {
    /// One instance's growth.
    public struct Instance: Sendable, Hashable, Codable {
        /// The instance's port.
        public var port: Int
        /// Growth of `payments` (HTTP: `sluice_payments_total`).
        public var charges: Int
        /// Growth of `declines` (HTTP: `sluice_declines_total`).
        public var declines: Int

        public init(port: Int, charges: Int, declines: Int) {
            self.port = port
            self.charges = charges
            self.declines = declines
        }
    }

    /// Instances that could not be measured, each named by its port, so the check can name them
    /// all.
    public struct ProbeFailure: Error, Sendable, Hashable, CustomStringConvertible {
        /// One instance that could not be measured.
        public struct Problem: Sendable, Hashable {
            /// The instance's port.
            public var port: Int
            /// What went wrong.
            public var reason: String
        }

        /// The unmeasured instances, in the order of the probes; empty when there was no probe
        /// at all.
        public var problems: [Problem]

        /// `port 7001: the server did not answer STATS after the run; port 7002: …`
        public var description: String {
            problems.isEmpty ? "no instance was probed" : problems.map { "port \($0.port): \($0.reason)" }.joined(separator: "; ")
        }
    }

    /// Every instance's growth, in the order of the probes.
    public var instances: [Instance]
    /// Counters read as 0 because a metrics page did not show them (HTTP), one note each.
    public var notes: [String]

    /// The charges over all instances.
    public var charges: Int { instances.reduce(0) { $0 + $1.charges } }
    /// The declines over all instances.
    public var declines: Int { instances.reduce(0) { $0 + $1.declines } }

    /// The growth of every instance probed in `probes`.
    ///
    /// An instance without a probe before or after the run cannot be measured, nor one whose
    /// `STATS` has no `payments=` (line mode); over HTTP a counter missing from a metrics page is
    /// read as 0 (nothing incremented it yet), with a note. A missing `declines` reads as 0.
    ///
    /// - Throws: ``ProbeFailure`` naming every instance that could not be measured (also when
    ///   `probes` is empty).
    public init(probes: [InstanceStats], http: Bool) throws(ProbeFailure) {
        var problems: [ProbeFailure.Problem] = []
        var instances: [Instance] = []
        var notes: [String] = []
        let source = http ? "GET /metrics did not answer 200" : "the server did not answer STATS"
        for probe in probes {
            guard let before = probe.before, let after = probe.after else {
                let when = probe.before == nil && probe.after == nil ? "before and after" : probe.before == nil ? "before" : "after"
                problems.append(.init(port: probe.port, reason: "\(source) \(when) the run"))
                continue
            }
            let charges: Int
            if http {
                // A counter nothing has incremented yet may be missing from a metrics page.
                if before.payments == nil || after.payments == nil {
                    notes.append("port \(probe.port): sluice_payments_total missing \(before.payments == nil ? "before" : "after") the run: read as 0")
                }
                charges = (after.payments ?? 0) - (before.payments ?? 0)
            } else {
                guard let beforePayments = before.payments, let afterPayments = after.payments else {
                    problems.append(.init(port: probe.port, reason: "the server did not report payments= in STATS"))
                    continue
                }
                charges = afterPayments - beforePayments
            }
            let declines = (after.declines ?? 0) - (before.declines ?? 0)
            instances.append(Instance(port: probe.port, charges: charges, declines: declines))
        }
        guard problems.isEmpty, !probes.isEmpty else { throw ProbeFailure(problems: problems) }
        self.instances = instances
        self.notes = notes
    }
}
