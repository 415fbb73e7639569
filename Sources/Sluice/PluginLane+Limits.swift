import CoreMetrics
import SluiceCore

/// What a request took from its plugin's limit chain (``GatePlugin/limits``): the key of each
/// stage, the stages it holds, its cost, and the rate stages' state after it; or, for a chain a
/// shared store decided, what it holds there.
@usableFromInline
struct LimitPass {
    @usableFromInline var keys: [String]
    @usableFromInline var hold: ChainHold
    @usableFromInline var cost: Int
    @usableFromInline var reports: [RateStageReport]
    /// What it holds of the stages a shared store decided (`nil` for a chain decided here).
    @usableFromInline var stored: StoreLimitHold?

    /// Whether it holds anything to give back or release.
    @inlinable
    var holdsAnything: Bool { !hold.isEmpty || stored != nil }

    /// Nothing taken (a plugin without limits, or a request that spends nothing).
    @inlinable
    static var none: LimitPass { LimitPass(keys: [], hold: ChainHold(), cost: 0, reports: []) }

    @inlinable
    init(keys: [String], hold: ChainHold, cost: Int, reports: [RateStageReport]) {
        self.keys = keys
        self.hold = hold
        self.cost = cost
        self.reports = reports
        self.stored = nil
    }

    /// What a request admitted by a shared store holds there.
    init(stored: StoreLimitHold, reports: [RateStageReport]) {
        self.init(keys: [], hold: ChainHold(), cost: stored.cost, reports: reports)
        self.stored = stored
    }
}

/// The plugin's limit chain: decided once its policy admitted a request and before the
/// request's execution is made or its effect run in place; given back when the execution never
/// runs, and its slots freed when its effect ends.
extension PluginLane {
    /// Decides `input` over every stage of the chain at `now`: `nil` when admitted (what it took
    /// in `pass`), else the refusal (`limited`, naming the stage, or `busy`), with every stage
    /// as it was before.
    @inlinable
    func passLimits(_ input: Plugin.Input, now: Instant, into pass: inout LimitPass) -> GateOutcome<Output>? {
        guard !limits.isEmpty else { return nil }
        // The keys and verdicts go into buffers the lane keeps: an admitted request run in
        // place allocates nothing for them.
        stageKeyBuffer.removeAll(keepingCapacity: true)
        for key in stageKeys { stageKeyBuffer.append(key(input)) }
        let cost = handle.plugin.cost(for: input)
        limits.admit(keys: stageKeyBuffer, cost: cost, now: now, into: &admission)
        for stage in admission.shadowRefusals {
            shadowRefusals[stage].increment()
            shadowCounts[stage] += 1
        }
        switch admission.result {
        case .admitted:
            pass = LimitPass(
                keys: stageKeyBuffer, hold: admission.hold, cost: cost,
                reports: limits.hasRateStages ? admittedReports(admission.verdicts) : [])
            return nil
        case .refused(let refusing):
            // The stages before the refusing one report their state after giving back.
            var verdicts = admission.verdicts
            limits.peek(stages: refusing, keys: stageKeyBuffer, now: now, into: &verdicts)
            return .limited(
                LimitRefusal(
                    stage: limits.stages[refusing].name, verdict: admission.verdicts[refusing],
                    reports: rateReports(verdicts)))
        case .busy:
            return .busy
        }
    }

    /// The rate stages' verdicts among `verdicts` (stage *i*'s at *i*), as reports.
    @inlinable
    func rateReports(_ verdicts: [StageVerdict]) -> [RateStageReport] {
        var reports: [RateStageReport] = []
        reports.reserveCapacity(verdicts.count)
        appendRateReports(verdicts, to: &reports)
        return reports
    }

    /// ``rateReports(_:)`` for an admitted request, written into the buffer the lane keeps. An
    /// array is a value: the buffer is refilled in place only once every outcome that carried
    /// its last contents is gone (it is then uniquely referenced), and copied otherwise, so an
    /// admitted request whose caller does not keep its outcome allocates nothing for them.
    @inlinable
    func admittedReports(_ verdicts: [StageVerdict]) -> [RateStageReport] {
        reportBuffer.removeAll(keepingCapacity: true)
        appendRateReports(verdicts, to: &reportBuffer)
        return reportBuffer
    }

    @inlinable
    func appendRateReports(_ verdicts: [StageVerdict], to reports: inout [RateStageReport]) {
        for (stage, verdict) in zip(limits.stages, verdicts) {
            guard case .rate(let decision) = verdict, case .rate(let options) = stage.limit else { continue }
            reports.append(RateStageReport(stage: stage.name, options: options, decision: decision))
        }
    }

    /// Gives back everything `pass` took: its request will not run.
    @inlinable
    func giveBack(_ pass: LimitPass, now: Instant) {
        guard !pass.hold.isEmpty else {
            pass.stored?.giveBack()
            return
        }
        limits.rollBack(pass.hold, keys: pass.keys, cost: pass.cost, now: now)
    }

    /// The effect of a request that `pass` admitted ended: its concurrency slots are free.
    @inlinable
    func endLimits(_ pass: LimitPass) {
        guard !pass.hold.isEmpty else {
            pass.stored?.release()
            return
        }
        limits.release(pass.hold, keys: pass.keys)
    }

    /// An execution is gone: frees its slots if it ran, gives back everything it took if it
    /// never did (superseded, cancelled or evicted while held).
    @inlinable
    func endLimits(of execution: Execution, now: Instant) {
        if case .held = execution.state {
            giveBack(execution.limits, now: now)
        } else {
            endLimits(execution.limits)
        }
    }

    @usableFromInline var shadowRefusalCounts: [(stage: String, count: Int)] {
        zip(limits.stages, shadowCounts).compactMap { $0.shadow ? ($0.name, $1) : nil }
    }
}
