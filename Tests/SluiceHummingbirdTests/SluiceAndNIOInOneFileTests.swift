#if Hummingbird
import Hummingbird
import NIOCore
import NIOPosix
import Sluice
import Testing

/// An app that imports Sluice, Hummingbird and NIO names both loop layers without a module
/// prefix: Sluice's loops are `SluiceLoop` and `SluiceLoopGroup`, NIO's `EventLoop` and
/// `EventLoopGroup`. This file compiling is most of the test.
@Suite struct SluiceAndNIOInOneFileTests {
    @Test func bothLoopGroupsAreNamedWithoutTheirModule() async throws {
        let nio: any EventLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let sluice = try SluiceLoopGroup(loopCount: 1)
        let nioLoop: any EventLoop = nio.next()
        let sluiceLoop: SluiceLoop = sluice.loops[0]
        let onNIO = try await nioLoop.submit { nioLoop.inEventLoop }.get()
        let onSluice = await sluiceLoop.submit { sluiceLoop.inEventLoop }
        #expect(onNIO && onSluice)
        var plugins = PluginRegistry()
        _ = try plugins.register(Echo())
        let gate = try Gate(group: sluice, plugins: plugins)
        await gate.shutdown()
        sluice.shutdownGracefully()
        try await nio.shutdownGracefully()
    }

    private struct Echo: GatePlugin {
        let name = "echo"
        let policy = GatePolicy.unrestricted
        func key(for input: String) -> String { input }
        func run(_ input: String, context: EffectContext) async throws -> String { input }
    }
}
#endif
