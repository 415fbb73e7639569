import SluiceCore
import SluiceTesting
import Testing

/// One table row: a diagram, the options it runs with, and what must come out.
struct MarbleDiagram<Options: Sendable>: Sendable, CustomTestStringConvertible {
    var name: String
    var options: Options
    var input: String
    var output: String
    var superseded: String = ""
    var dropped: String = ""
    var testDescription: String { name }
}

/// What happened to the events of a marble diagram.
struct MarbleOutcome: Equatable, CustomStringConvertible {
    /// One character per tick: `-` nothing ran, a letter ran, `[ab]` several ran.
    var output: String
    /// Letters superseded, in the order it happened.
    var superseded: String
    /// Letters dropped, in the order it happened.
    var dropped: String
    /// Every decision, in order (for exact checks).
    var log: [String]

    var description: String { "output: \(output) superseded: \(superseded) dropped: \(dropped)" }
}

/// Runs a marble diagram through a policy on a manual timeline.
///
/// Each character of `input` is one tick (`tick`, 1 ms by default): a letter is an event at that
/// tick; `-` is a quiet tick; `|` ends the input (timers still fire afterwards). Timers the policy
/// requests are delivered through a ``ManualTimerQueue`` *before* the events of the same tick.
func runMarble(_ input: String, _ policy: TimedPolicy<some TimedPolicyState>, tick: Duration = .milliseconds(1)) -> MarbleOutcome {
    var policy = policy
    let tickNanos = tick.nanosecondsClamped
    var queue = ManualTimerQueue<Void>()
    var runs: [Int: [Character]] = [:]
    var superseded = ""
    var dropped = ""
    var log: [String] = []
    var lastTick = 0

    func letter(_ token: EventToken) -> Character { Character(Unicode.Scalar(UInt8(token.rawValue))) }
    func tickOf(_ instant: Instant) -> Int { Int(instant.nanoseconds / tickNanos) }

    let fire: (inout ManualTimerQueue<Void>, Instant, Void) -> Void = { queue, now, _ in
        switch policy.fire(now: now) {
        case .run(let token):
            runs[tickOf(now), default: []].append(letter(token))
            log.append("\(tickOf(now)): fire run \(letter(token))")
        case .reschedule(let deadline):
            queue.schedule(at: deadline, ())
            log.append("\(tickOf(now)): fire reschedule \(tickOf(deadline))")
        case .none:
            log.append("\(tickOf(now)): fire none")
        }
    }

    for (index, character) in input.enumerated() {
        if character == "|" { lastTick = index; break }
        lastTick = index
        let now = Instant(nanoseconds: Int64(index) * tickNanos)
        queue.advance(to: now, fire)
        guard character.isLetter, let ascii = character.asciiValue else { continue }
        switch policy.event(EventToken(UInt64(ascii)), now: now) {
        case .run:
            runs[index, default: []].append(character)
            log.append("\(index): \(character) run")
        case .drop(let retryAfter):
            dropped.append(character)
            log.append("\(index): \(character) drop retryAfter \(retryAfter.nanosecondsClamped / tickNanos)")
        case .hold(let schedule, let old):
            if let schedule { queue.schedule(at: schedule, ()) }
            if let old { superseded.append(letter(old)) }
            log.append("\(index): \(character) hold schedule \(schedule.map { String(tickOf($0)) } ?? "nil") superseded \(old.map { String(letter($0)) } ?? "nil")")
        }
    }
    var guardCount = 0
    while let deadline = queue.nextDeadline, guardCount < 10_000 {
        queue.advance(to: Swift.max(deadline, queue.now), fire)
        guardCount += 1
    }
    let end = Swift.max(lastTick, runs.keys.max() ?? 0)
    var output = ""
    for tick in 0...end {
        switch runs[tick] ?? [] {
        case []: output.append("-")
        case let letters where letters.count == 1: output.append(letters[0])
        case let letters: output.append("[\(String(letters))]")
        }
    }
    while output.hasSuffix("-") { output.removeLast() }
    return MarbleOutcome(output: output, superseded: superseded, dropped: dropped, log: log)
}

/// Trims trailing quiet ticks from an expected diagram.
func trimmed(_ expected: String) -> String {
    var expected = expected
    while expected.hasSuffix("-") || expected.hasSuffix("|") { expected.removeLast() }
    return expected
}

extension Instant {
    /// `n` milliseconds (for readable tables).
    static func ms(_ n: Int64) -> Instant { Instant(milliseconds: n) }
}
