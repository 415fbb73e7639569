import SluiceCore

/// A chain decided by a shared store in steps: consecutive stages the store keeps in one place
/// (``SharedStore/place(of:)``, a Redis hash slot) are decided together, all or nothing, and the
/// steps run one after another. When a step refuses, or the store fails, what the earlier steps
/// took is given back, as a local chain rolls back: the same all-or-nothing answer, decided in
/// several atomic steps rather than one.
///
/// A pure state machine: the driver (``SharedStore/admitChain(_:cost:owner:on:_:)``) asks the
/// store for each step it names and hands it each answer.
struct StagedStoreAdmission {
    /// The steps: ranges of stage indices, in order.
    let steps: [Range<Int>]
    /// The step being decided.
    private(set) var current = 0
    /// The steps admitted so far, each with its answer (in its own indices).
    private(set) var taken: [(range: Range<Int>, admission: StoreAdmission)] = []
    /// Every stage's verdict so far, and the shadow stages that would have refused.
    private var verdicts: [StoreVerdict] = []
    private var shadowRefusals: [Int] = []
    private var hold = ChainHold()

    /// What to do next.
    enum Step {
        /// Ask the store to decide the stages in this range, all or nothing.
        case ask(Range<Int>)
        /// Decided: answer `admission`, after giving back what `giveBack` names (every earlier
        /// step of a refused request; nothing when admitted).
        case decided(StoreAdmission, giveBack: [(range: Range<Int>, admission: StoreAdmission)])
        /// The store failed deciding the stages in `step`: give back what `giveBack` names and
        /// the slots `step` may have taken (its answer may be lost while its change landed), then
        /// let the failure mode decide.
        case failed(StoreError, step: Range<Int>, giveBack: [(range: Range<Int>, admission: StoreAdmission)])
    }

    /// The steps of `places` (stage *i*'s place at *i*): consecutive stages of one place are one
    /// step.
    init(places: [Int?]) {
        var steps: [Range<Int>] = []
        var start = 0
        for index in places.indices.dropFirst() where places[index] != places[index - 1] {
            steps.append(start..<index)
            start = index
        }
        if !places.isEmpty { steps.append(start..<places.count) }
        self.steps = steps
    }

    /// Whether the whole chain is one step.
    var isOneStep: Bool { steps.count <= 1 }

    /// The first step to ask.
    var first: Step {
        steps.isEmpty ? .decided(StoreAdmission(result: .admitted, verdicts: []), giveBack: []) : .ask(steps[0])
    }

    /// The store answered the current step.
    mutating func answered(_ answer: Result<StoreAdmission, StoreError>) -> Step {
        let range = steps[current]
        let admission: StoreAdmission
        switch answer {
        case .success(let answered): admission = answered
        case .failure(let error): return .failed(error, step: range, giveBack: taken)
        }
        verdicts.append(contentsOf: admission.verdicts)
        shadowRefusals.append(contentsOf: admission.shadowRefusals.map { $0 + range.lowerBound })
        switch admission.result {
        case .admitted:
            for index in range where admission.hold.contains(index - range.lowerBound) { hold.insert(index) }
            taken.append((range, admission))
            current += 1
            guard current < steps.count else {
                return .decided(
                    StoreAdmission(result: .admitted, verdicts: verdicts, shadowRefusals: shadowRefusals, hold: hold),
                    giveBack: [])
            }
            return .ask(steps[current])
        case .refused(let stage):
            return .decided(
                StoreAdmission(
                    result: .refused(stage: stage + range.lowerBound), verdicts: verdicts, shadowRefusals: shadowRefusals),
                giveBack: taken)
        case .busy(let stage):
            return .decided(
                StoreAdmission(result: .busy(stage: stage + range.lowerBound), verdicts: verdicts, shadowRefusals: shadowRefusals),
                giveBack: taken)
        }
    }
}

extension SharedStore {
    /// Decides `stages` all or nothing: in one step when the store keeps them in one place,
    /// otherwise step by step, a refusal or a failure giving back
    /// what the earlier steps took. Completes on `caller`'s thread, never from inside the call.
    public func admitChain(
        _ stages: [StoreStage], cost: Int, owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<StoreAdmission, StoreError>) -> Void
    ) {
        let staged = StagedStoreAdmission(places: stages.map { place(of: $0) })
        if staged.isOneStep {
            admit(stages, cost: cost, owner: owner, on: caller) { answer in
                if case .failure = answer { self.releaseSlots(stages, owner: owner, on: caller) }
                completion(answer)
            }
            return
        }
        carryOut(staged.first, staged, stages, cost: cost, owner: owner, on: caller, completion)
    }

    /// Gives back what `admission` (an answer of ``admitChain(_:cost:owner:on:_:)`` for
    /// `stages`) holds, one call per place. What the store does not take is not asked again: a
    /// rate refund lost refuses more, never less, and a slot comes free when its lease runs out.
    public func giveBackChain(_ stages: [StoreStage], admission: StoreAdmission, cost: Int, owner: String, on caller: any StoreCaller) {
        guard !admission.hold.isEmpty else { return }
        for range in StagedStoreAdmission(places: stages.map { place(of: $0) }).steps {
            // An admission that holds anything has a verdict for every stage (a store that
            // answered fewer closes no throttle window it gave no verdict for).
            var part = StoreAdmission(
                result: .admitted, verdicts: Array(admission.verdicts[range.clamped(to: admission.verdicts.indices)]))
            for index in range where admission.hold.contains(index) { part.hold.insert(index - range.lowerBound) }
            guard !part.hold.isEmpty else { continue }
            giveBack(Array(stages[range]), admission: part, cost: cost, owner: owner, on: caller) { _ in }
        }
    }

    /// Frees whatever slot `owner` may hold in the concurrency stages among `stages` (all in one
    /// place): a decision whose answer was lost may have taken them. Harmless when it did not.
    func releaseSlots(_ stages: [StoreStage], owner: String, on caller: any StoreCaller) {
        var slots = StoreAdmission(result: .admitted, verdicts: [])
        for (index, stage) in stages.enumerated() {
            if case .concurrency = stage.limit { slots.hold.insert(index) }
        }
        guard !slots.hold.isEmpty else { return }
        giveBack(stages, admission: slots, cost: 0, owner: owner, on: caller) { _ in }
    }

    /// Renews `owner`'s slots in the concurrency stages among `stages`, one call per place;
    /// answers how many it still held, or the first failure.
    public func renewChainSlots(
        _ stages: [StoreStage], owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<Int, StoreError>) -> Void
    ) {
        let slots = stages.filter { if case .concurrency = $0.limit { true } else { false } }
        let steps = StagedStoreAdmission(places: slots.map { place(of: $0) }).steps
        guard !steps.isEmpty else {
            caller.execute { completion(.success(0)) }
            return
        }
        let answers = SlotRenewalTally(expected: steps.count, completion)
        for range in steps {
            renewSlots(Array(slots[range]), owner: owner, on: caller) { answers.add($0) }
        }
    }

    private func carryOut(
        _ step: StagedStoreAdmission.Step, _ staged: StagedStoreAdmission, _ stages: [StoreStage], cost: Int,
        owner: String, on caller: any StoreCaller,
        _ completion: @escaping @Sendable (Result<StoreAdmission, StoreError>) -> Void
    ) {
        switch step {
        case .ask(let range):
            admit(Array(stages[range]), cost: cost, owner: owner, on: caller) { answer in
                var next = staged
                let step = next.answered(answer)
                self.carryOut(step, next, stages, cost: cost, owner: owner, on: caller, completion)
            }
        case .decided(let admission, let giveBack):
            for taken in giveBack {
                self.giveBack(Array(stages[taken.range]), admission: taken.admission, cost: cost, owner: owner, on: caller) { _ in }
            }
            if staged.steps.isEmpty {
                caller.execute { completion(.success(admission)) }
            } else {
                completion(.success(admission))
            }
        case .failed(let error, let step, let giveBack):
            releaseSlots(Array(stages[step]), owner: owner, on: caller)
            for taken in giveBack {
                self.giveBack(Array(stages[taken.range]), admission: taken.admission, cost: cost, owner: owner, on: caller) { _ in }
            }
            completion(.failure(error))
        }
    }
}

/// The answers of one renewal sent to several places, summed once all came (on one loop).
private final class SlotRenewalTally: @unchecked Sendable {
    // @unchecked Sendable: a store completes every call on the thread of the caller it was made
    // from, and all of these calls were made from one caller, so the fields are only touched
    // there.
    private var expected: Int
    private var held = 0
    private var failure: StoreError?
    private let completion: @Sendable (Result<Int, StoreError>) -> Void

    init(expected: Int, _ completion: @escaping @Sendable (Result<Int, StoreError>) -> Void) {
        self.expected = expected
        self.completion = completion
    }

    func add(_ answer: Result<Int, StoreError>) {
        switch answer {
        case .success(let count): held += count
        case .failure(let error): failure = failure ?? error
        }
        expected -= 1
        guard expected == 0 else { return }
        completion(failure.map { .failure($0) } ?? .success(held))
    }
}
