import SluiceCore

/// The rate stages' reports an outcome carries (``RunInfo/limits``), built only when read.
///
/// An admitted request's reports are kept as the chain's decision (its stages and verdicts):
/// carrying it costs one reference, and a caller that never reads the reports (an effect run in
/// place whose outcome is dropped) never pays for building them.
@usableFromInline
struct LimitReports: Sendable {
    @usableFromInline
    enum Storage: Sendable {
        /// Reports already built.
        case built([RateStageReport])
        /// A chain's decision: reports are built from its rate stages' verdicts when read.
        case decided(ChainDecision)
    }

    @usableFromInline var storage: Storage

    /// No report (a plugin without rate stages, a replay, a join).
    @inlinable
    static var none: LimitReports { LimitReports(storage: .built([])) }

    /// Reports already built.
    @inlinable
    init(_ reports: [RateStageReport]) {
        storage = .built(reports)
    }

    /// The reports of the rate stages of `decision`'s chain.
    ///
    /// - Precondition: some stage of the chain is a rate stage, so that there is a report.
    @inlinable
    init(_ decision: ChainDecision) {
        storage = .decided(decision)
    }

    @inlinable
    init(storage: Storage) {
        self.storage = storage
    }

    /// Whether there is no report.
    @inlinable
    var isEmpty: Bool {
        switch storage {
        case .built(let reports): reports.isEmpty
        case .decided: false
        }
    }

    /// The reports, in stage order.
    @inlinable
    var reports: [RateStageReport] {
        switch storage {
        case .built(let reports):
            return reports
        case .decided(let decision):
            return Self.reports(decision.admission.verdicts, of: decision.stages)
        }
    }

    /// The reports of the rate stages among `stages` whose verdicts `verdicts` holds.
    @inlinable
    static func reports(_ verdicts: [StageVerdict], of stages: [ChainStage]) -> [RateStageReport] {
        var reports: [RateStageReport] = []
        reports.reserveCapacity(verdicts.count)
        for (stage, verdict) in zip(stages, verdicts) {
            guard case .rate(let decision) = verdict, case .rate(let options) = stage.limit else { continue }
            reports.append(RateStageReport(stage: stage.name, options: options, decision: decision))
        }
        return reports
    }
}
