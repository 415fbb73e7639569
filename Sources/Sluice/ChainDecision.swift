import SluiceCore

/// A lane's last decision over its plugin's limit chain, shared with the outcome of the request
/// it admitted so that the outcome's reports (``RunInfo/limits``) are built only when read.
///
/// The lane decides into it again only while it holds the one reference; once an outcome still
/// holds it, the lane decides into a new one. An outcome carries it by one reference.
@usableFromInline
final class ChainDecision: @unchecked Sendable {
    // @unchecked Sendable: `admission` is written only by the lane that made it, under its
    // shard's lock, and only after `isKnownUniquelyReferenced` showed that the lane holds the
    // sole reference (see `PluginLane.decisionToWrite()`); every other holder only reads it.
    /// The chain's stages (stage *i* decided `admission.verdicts[i]`).
    @usableFromInline let stages: [ChainStage]
    /// The decision.
    @usableFromInline @exclusivity(unchecked) var admission = ChainAdmission()

    @usableFromInline
    init(stages: [ChainStage]) {
        self.stages = stages
    }
}

extension ChainDecision: LimitReportSource {
    /// The reports of the chain's rate stages, from their verdicts.
    @usableFromInline var reports: [RateStageReport] { LimitReports.reports(admission.verdicts, of: stages) }
}
