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
    /// The rate stages' reports of an admitted request (see ``RunInfo/limits``).
    @usableFromInline var reports: LimitReports
    /// What it holds of the stages a shared store decided (`nil` for a chain decided here).
    @usableFromInline var stored: StoreLimitHold?

    /// Whether it holds anything to give back or release.
    @inlinable
    var holdsAnything: Bool { !hold.isEmpty || stored != nil }

    /// Nothing taken (a plugin without limits, or a request that spends nothing).
    @inlinable
    static var none: LimitPass { LimitPass(keys: [], hold: ChainHold(), cost: 0, reports: .none) }

    @inlinable
    init(keys: [String], hold: ChainHold, cost: Int, reports: LimitReports) {
        self.keys = keys
        self.hold = hold
        self.cost = cost
        self.reports = reports
        self.stored = nil
    }

    /// This pass as an execution keeps it while its effect runs as a task: its reports built
    /// now, which lets go of the lane's chain decision so that the next request decides into it
    /// again (the outcome at the effect's end reads them anyway).
    @inlinable
    var keptByExecution: LimitPass {
        guard reports.source is ChainDecision else { return self }
        var kept = self
        kept.reports = LimitReports(reports.reports)
        return kept
    }

    /// What a request admitted by a shared store holds there.
    init(stored: StoreLimitHold, reports: [RateStageReport]) {
        self.init(keys: [], hold: ChainHold(), cost: stored.cost, reports: LimitReports(reports))
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
        // The keys and verdicts go into buffers the lane keeps (the keys written in place, one
        // per stage), and an admitted request's reports are built from them only when read: an
        // admitted request run in place whose outcome is dropped allocates nothing for them.
        stageKeyBuffer.withUnsafeMutableBufferPointer { keys in
            for stage in keys.indices { keys[stage] = limitStages[stage].key(input) }
        }
        let cost = handle.plugin.cost(for: input)
        let decision = decisionToWrite()
        limits.admit(keys: stageKeyBuffer, cost: cost, now: now, into: &decision.admission)
        if !decision.admission.shadowRefusals.isEmpty {
            for stage in decision.admission.shadowRefusals {
                shadowRefusals[stage].increment()
                shadowCounts[stage] += 1
            }
        }
        switch decision.admission.result {
        case .admitted:
            pass = LimitPass(
                keys: stageKeyBuffer, hold: decision.admission.hold, cost: cost,
                reports: limits.hasRateStages ? LimitReports(source: decision) : .none)
            return nil
        case .refused(let refusing):
            // The stages before the refusing one report their state after giving back.
            var verdicts = decision.admission.verdicts
            limits.peek(stages: refusing, keys: stageKeyBuffer, now: now, into: &verdicts)
            return .limited(
                LimitRefusal(
                    stage: limits.stages[refusing].name, verdict: decision.admission.verdicts[refusing],
                    reports: LimitReports.reports(verdicts, of: limits.stages)))
        case .busy:
            return .busy
        }
    }

    /// The chain decision to decide into: the lane's last one when nothing else holds it (the
    /// outcome that carried it is gone), else a new one that becomes the lane's.
    @inlinable
    func decisionToWrite() -> ChainDecision {
        if !isKnownUniquelyReferenced(&chainDecision) { chainDecision = ChainDecision(stages: limits.stages) }
        return chainDecision
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
