/// Reads a fuzzer's input as a stream of small decisions. Once the bytes run out every read
/// answers 0 and ``isExhausted`` turns true, so a harness loops `while !input.isExhausted`.
public struct FuzzInput {
    @usableFromInline let bytes: UnsafeBufferPointer<UInt8>
    @usableFromInline var position = 0

    /// The input libFuzzer handed to `LLVMFuzzerTestOneInput`.
    public init(_ data: UnsafePointer<UInt8>, _ size: Int) {
        bytes = UnsafeBufferPointer(start: data, count: size)
    }

    /// Whether every byte has been read.
    @inlinable
    public var isExhausted: Bool { position >= bytes.count }

    /// How many bytes are left.
    @inlinable
    public var remaining: Int { Swift.max(0, bytes.count - position) }

    /// The next byte, or 0 past the end.
    @inlinable
    public mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    /// A number in `0..<count` from one byte (`count` at most 256).
    @inlinable
    public mutating func below(_ count: Int) -> Int {
        precondition(count >= 1 && count <= 256)
        return Int(byte()) % count
    }

    /// A number in `range` from one byte (at most 256 values).
    @inlinable
    public mutating func int(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + below(range.count)
    }

    /// A boolean from one byte.
    @inlinable
    public mutating func bool() -> Bool {
        byte() & 1 == 1
    }

    /// A little-endian number of `count` bytes (up to 8).
    @inlinable
    public mutating func uint64(bytes count: Int = 8) -> UInt64 {
        var value: UInt64 = 0
        for shift in 0..<count {
            value |= UInt64(byte()) << (8 * UInt64(shift))
        }
        return value
    }

    /// A number of any size: one byte chooses an edge value (0, ±1, the extremes and their
    /// halves, powers of ten) or how many little-endian bytes follow.
    public mutating func wideInt() -> Int64 {
        let choice = byte()
        let edges: [Int64] = [
            0, 1, -1, 2, .max, .min, .max - 1, .min + 1, .max / 2, .max / 2 + 1, .min / 2,
            1_000, 1_000_000, 1_000_000_000, 1_000_000_000_000, 1 << 32, -(1 << 32), 1 << 62,
        ]
        if Int(choice) < edges.count * 4 {
            return edges[Int(choice) % edges.count]
        }
        return Int64(truncatingIfNeeded: uint64(bytes: Int(choice) % 9))
    }

    /// The rest of the input.
    public mutating func rest() -> UnsafeBufferPointer<UInt8> {
        let start = Swift.min(position, bytes.count)
        position = bytes.count
        return UnsafeBufferPointer(rebasing: bytes[start...])
    }
}

/// Stops the fuzzer with `message` when `condition` is false: a broken invariant is a crash
/// that libFuzzer records and minimises. Checked in release builds too.
@inlinable
public func require(
    _ condition: @autoclosure () -> Bool,
    _ message: @autoclosure () -> String,
    file: StaticString = #fileID,
    line: UInt = #line
) {
    if !condition() {
        fatalError("invariant broken: \(message())", file: file, line: line)
    }
}

/// Timers requested by a policy under test, fired in deadline order (equal deadlines in the
/// order they were requested). Time is a plain number of ticks.
public struct TimerQueue<Payload> {
    @usableFromInline var entries: [(deadline: Int64, sequence: UInt64, payload: Payload)] = []
    @usableFromInline var sequence: UInt64 = 0

    /// An empty queue.
    public init() {}

    /// The number of timers not yet fired.
    public var count: Int { entries.count }

    /// The earliest deadline, if any.
    public var nextDeadline: Int64? { entries.first?.deadline }

    /// Requests a timer at `deadline`.
    public mutating func schedule(at deadline: Int64, _ payload: Payload) {
        let position = entries.firstIndex { ($0.deadline, $0.sequence) > (deadline, sequence) } ?? entries.endIndex
        entries.insert((deadline, sequence, payload), at: position)
        sequence &+= 1
    }

    /// Whether a timer not yet fired carries a payload that matches.
    public func contains(where matches: (Payload) -> Bool) -> Bool {
        entries.contains { matches($0.payload) }
    }

    /// Removes and returns the earliest timer due at `now` or before.
    public mutating func popDue(now: Int64) -> (deadline: Int64, payload: Payload)? {
        guard let first = entries.first, first.deadline <= now else { return nil }
        entries.removeFirst()
        return (first.deadline, first.payload)
    }
}
