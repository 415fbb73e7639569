import SluiceCore

/// The rate stages' reports an outcome carries (``RunInfo/limits``), built only when read.
///
/// An admitted request's reports are kept as the chain's decision (its stages and verdicts,
/// a ``ChainDecision``): carrying them costs one reference, and a caller that never reads them
/// (an effect run in place whose outcome is dropped) never pays for building them. An outcome
/// without reports (a plugin without rate stages, a replay, a join) carries no reference at all.
@usableFromInline
struct LimitReports: Sendable {
    /// Where the reports come from; `nil` for none.
    @usableFromInline var source: (any LimitReportSource)?

    /// No report.
    @inlinable
    static var none: LimitReports { LimitReports(source: nil) }

    /// Reports already built.
    @inlinable
    init(_ reports: [RateStageReport]) {
        source = reports.isEmpty ? nil : BuiltLimitReports(reports)
    }

    @inlinable
    init(source: (any LimitReportSource)?) {
        self.source = source
    }

    /// The reports, in stage order.
    @inlinable
    var reports: [RateStageReport] { source?.reports ?? [] }

    /// The reports of the rate stages among `stages` whose verdicts `verdicts` holds (stage
    /// *i*'s at *i*, up to the last stage decided).
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

/// What ``LimitReports`` builds its reports from: a chain's decision, or reports built already.
/// Never changes once an outcome holds it.
@usableFromInline
protocol LimitReportSource: AnyObject, Sendable {
    /// The rate stages' reports, in stage order (never empty).
    var reports: [RateStageReport] { get }
}

/// Reports built already: a shared store's, or set through ``RunInfo/limits``.
@usableFromInline
final class BuiltLimitReports: LimitReportSource {
    @usableFromInline let reports: [RateStageReport]

    @inlinable
    init(_ reports: [RateStageReport]) {
        self.reports = reports
    }
}
