import SluiceCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A fixed set of ``SluiceLoop``s, one per core by default.
///
/// Connections are spread over the loops round-robin (``next()``); per-key state lives on the
/// loop that ``loop(forKeyHash:)`` picks, so every event of one key is decided on one thread.
public final class SluiceLoopGroup: Sendable {
    /// The loops, in a fixed order.
    public let loops: [SluiceLoop]
    private let cursor = Atomic<Int>(0)

    /// The number of online cores (at least 1).
    public static var coreCount: Int {
        max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    /// Starts `loopCount` loops named `<namePrefix>-<index>`, on `clock` when a test passes one
    /// (see ``ManualLoopClock``).
    ///
    /// - Throws: `SluiceError` with code `.invalidOption` when `loopCount < 1`, or the
    ///   error of a loop that failed to start (the loops already started are shut down).
    public init(
        loopCount: Int = SluiceLoopGroup.coreCount, namePrefix: String = "sluice-loop", clock: ManualLoopClock? = nil
    ) throws(SluiceError) {
        guard loopCount >= 1 else {
            throw SluiceError(code: .invalidOption, message: "a loop group needs at least one loop", value: "\(loopCount)")
        }
        var loops: [SluiceLoop] = []
        loops.reserveCapacity(loopCount)
        do {
            for index in 0..<loopCount {
                loops.append(try SluiceLoop(name: "\(namePrefix)-\(index)", clock: clock))
            }
        } catch {
            for loop in loops { loop.shutdownGracefully() }
            throw error
        }
        self.loops = loops
    }

    /// The next loop, round-robin.
    public func next() -> SluiceLoop {
        let index = cursor.wrappingAdd(1, ordering: .relaxed).oldValue
        return loops[Int(UInt(bitPattern: index) % UInt(loops.count))]
    }

    /// The loop that owns keys with this hash.
    @inlinable
    public func loop(forKeyHash hash: UInt64) -> SluiceLoop {
        loops[Int(hash % UInt64(loops.count))]
    }

    /// The index of the loop that owns keys with this hash.
    @inlinable
    public func loopIndex(forKeyHash hash: UInt64) -> Int {
        Int(hash % UInt64(loops.count))
    }

    /// The loop that owns `key` (by its `hashValue`, stable within one process).
    public func loop(for key: some Hashable) -> SluiceLoop {
        loop(forKeyHash: UInt64(bitPattern: Int64(key.hashValue)))
    }

    /// Shuts every loop down gracefully (see ``SluiceLoop/shutdownGracefully()``). Call from
    /// outside the group's loops.
    public func shutdownGracefully() {
        for loop in loops { loop.shutdownGracefully() }
    }
}
