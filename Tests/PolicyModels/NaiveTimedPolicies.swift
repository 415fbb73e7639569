/// Naive throttle and debounce models: they keep every run and every held event and step from
/// one event or window end to the next instead of asking for timers. Each returns one line per
/// observable outcome (`"<t> run e<n>"`, `"<t> drop e<n> retry <d>"`, `"<t> hold e<n>"`,
/// `"<t> superseded e<n>"`), the form the real policies' traces take in the property tests and
/// the timed fuzz target.

/// One event of a key: its instant (in ticks) and its token.
public typealias ModelEvent = (time: Int64, token: UInt64)

/// The events of `gaps` (the gap before each event, in ticks), with tokens 1, 2, 3, ….
public func modelEvents(gaps: [Int]) -> [ModelEvent] {
    var t: Int64 = 0
    return gaps.enumerated().map { n, gap in
        t += Int64(gap)
        return (t, UInt64(n + 1))
    }
}

/// A naive throttle: keeps every run and every held event, decides leading-only events from the
/// definition "an event at t runs iff nothing ran in (t − I, t]".
public func naiveThrottle(_ events: [ModelEvent], interval: Int64, leading: Bool, trailing: Bool, first: Bool) -> [String] {
    var lines: [String] = []
    var runs: [Int64] = []
    var windowStart: Int64? = nil
    var held: [UInt64] = []
    var next = 0
    var tick = events.first?.time ?? 0
    while next < events.count || !held.isEmpty {
        if let start = windowStart, !held.isEmpty, tick >= start + interval {
            let token = first ? held.first! : held.last!
            lines.append("\(tick) run e\(token)")
            runs.append(tick)
            windowStart = tick
            held = []
        }
        while next < events.count, events[next].time == tick {
            let token = events[next].token
            next += 1
            if leading && !trailing {
                if let last = runs.last(where: { $0 > tick - interval && $0 <= tick }) {
                    lines.append("\(tick) drop e\(token) retry \(last + interval - tick)")
                } else {
                    lines.append("\(tick) run e\(token)")
                    runs.append(tick)
                }
                continue
            }
            let open = windowStart.map { tick < $0 + interval || !held.isEmpty } ?? false
            if !open {
                windowStart = tick
                if leading {
                    lines.append("\(tick) run e\(token)")
                    runs.append(tick)
                } else {
                    held = [token]
                    lines.append("\(tick) hold e\(token)")
                }
            } else if held.isEmpty {
                held.append(token)
                lines.append("\(tick) hold e\(token)")
            } else if first {
                lines.append("\(tick) drop e\(token) retry \(Swift.max(0, windowStart! + interval - tick))")
            } else {
                lines.append("\(tick) superseded e\(held.last!)")
                held.append(token)
                lines.append("\(tick) hold e\(token)")
            }
        }
        // Nothing changes between here and the next event or the end of the window.
        var following = next < events.count ? events[next].time : Int64.max
        if let start = windowStart, !held.isEmpty { following = Swift.min(following, Swift.max(tick + 1, start + interval)) }
        tick = following
    }
    return lines
}

/// A naive debounce: keeps the burst's events and polls for the quiet end and the maxWait end.
public func naiveDebounce(_ events: [ModelEvent], quiet: Int64, maxWait: Int64?, leading: Bool, trailing: Bool) -> [String] {
    var lines: [String] = []
    var burst: [Int64] = []
    var clockStart: Int64 = 0
    var held: [UInt64] = []
    let maxWait = maxWait ?? Int64.max / 4
    var next = 0
    var tick = events.first?.time ?? 0
    while next < events.count || !held.isEmpty {
        if !held.isEmpty, let lastEvent = burst.last, tick >= lastEvent + quiet || tick >= clockStart + maxWait {
            lines.append("\(tick) run e\(held.last!)")
            held = []
            if tick >= lastEvent + quiet { burst = [] } else { clockStart = tick }
        }
        while next < events.count, events[next].time == tick {
            let token = events[next].token
            next += 1
            let inBurst = burst.last.map { tick < $0 + quiet || !held.isEmpty } ?? false
            if !inBurst {
                burst = [tick]
                clockStart = tick
                if leading {
                    lines.append("\(tick) run e\(token)")
                } else {
                    held = [token]
                    lines.append("\(tick) hold e\(token)")
                }
                continue
            }
            burst.append(tick)
            if trailing {
                if let old = held.last { lines.append("\(tick) superseded e\(old)") }
                held.append(token)
                lines.append("\(tick) hold e\(token)")
            } else if tick >= clockStart + maxWait {
                clockStart = tick
                lines.append("\(tick) run e\(token)")
            } else {
                lines.append("\(tick) drop e\(token) retry \(Swift.min(tick + quiet, clockStart + maxWait) - tick)")
            }
        }
        var following = next < events.count ? events[next].time : Int64.max
        if !held.isEmpty, let lastEvent = burst.last {
            following = Swift.min(following, Swift.max(tick + 1, Swift.min(lastEvent + quiet, clockStart + maxWait)))
        }
        tick = following
    }
    return lines
}
