import Sluice

/// A gate without sockets on a manual clock: for testing plugins (yours too) through the typed
/// API, deciding exact window boundaries without waiting for real time.
///
/// ```swift
/// var plugins = PluginRegistry()
/// let tap = try plugins.register(ButtonTapPlugin(window: .seconds(1)))
/// let harness = try GateHarness(plugins: plugins)
/// #expect(await harness.gate.submit(tap, "k").output == 1)
/// await harness.advance(by: .milliseconds(999))
/// guard case .throttled(let retryAfter) = await harness.gate.submit(tap, "k") else { … }
/// harness.shutdown()
/// ```
///
/// Use `Gate/start(_:)` for requests whose outcome comes later: it returns once the request
/// is registered, so advancing the clock after it reaches the request.
public final class GateHarness: Sendable {
    /// The clock every shard reads; only ``advance(by:)`` moves it.
    public let clock: ManualGateClock
    /// The gate.
    public let gate: Gate
    /// The loops.
    public let group: SluiceLoopGroup

    /// A harness with `loops` loops (one shard each) running `plugins`, on `clock` (a fresh
    /// manual clock unless another component, such as a `MemoryStore`, must read the same one).
    public init(
        plugins: PluginRegistry, loops: Int = 1, options: GateOptions = GateOptions(),
        clock: ManualGateClock = ManualGateClock()
    ) throws {
        let group = try SluiceLoopGroup(loopCount: loops, namePrefix: "harness")
        do {
            gate = try Gate(group: group, plugins: plugins, options: options, clock: clock.clock(for:))
        } catch {
            group.shutdownGracefully()
            throw error
        }
        self.clock = clock
        self.group = group
    }

    /// Lets the loops run what is queued (effects a request started from off the loops), then
    /// moves the clock forward, running the timers that come due (and the effects they wake).
    public func advance(by duration: Duration) async {
        await settle()
        await clock.advance(by: duration)
    }

    /// Lets every loop run what is queued, a few rounds deep (effects that were woken, replies
    /// on their way).
    public func settle() async {
        for _ in 0..<8 {
            for loop in group.loops { await loop.submit {} }
        }
    }

    /// Stops the loops (without draining the gate: what still runs is dropped with them; call
    /// `Gate/shutdown(gracePeriod:)` first to test a drain). Call once, from outside the loops.
    public func shutdown() {
        group.shutdownGracefully()
        clock.cancelAll()
    }
}
