import Sluice
import SluicePluginTesting
import SluiceTestSupport
import Testing

/// A plugin written outside `Plugins/`, against the public API of `Sluice` only: `SAVE <doc>
/// <text>` autosaves a document at most once per 500 ms, and the latest edit of a window is
/// saved when the window ends (a leading + trailing throttle).
struct AutosavePlugin: GatePlugin {
    struct Edit: Sendable {
        let document: String
        let text: String
    }

    let name = "save"
    let verb = "SAVE"
    let policy = GatePolicy.throttle(try! ThrottleOptions(interval: .milliseconds(500), leading: true, trailing: true))
    let saves = PluginCounter("saves")

    func parse(_ arguments: Substring) throws(RequestError) -> Edit {
        guard let space = arguments.firstIndex(of: " "), let document = RequestLine.key(arguments[..<space]) else {
            throw .usage
        }
        let text = arguments[arguments.index(after: space)...]
        guard !text.isEmpty else { throw .invalid("empty-edit", message: "nothing to save") }
        return Edit(document: document, text: String(text))
    }

    func key(for input: Edit) -> String { input.document }

    func handle(_ input: Edit, context: EffectContext) async throws -> Int {
        try await context.sleep(for: .milliseconds(10))  // the disk
        saves.increment()
        return input.text.utf8.count
    }

    func reply(for output: Int) -> PluginReply { PluginReply("OK saved=\(output)") }

    var counters: [PluginCounter] { [saves] }
}

@Suite struct ExamplePluginTests {
    private func registry() throws -> PluginRegistry {
        var plugins = PluginRegistry()
        try plugins.register(AutosavePlugin())
        return plugins
    }

    @Test func leadingAndTrailingThrottleOnAManualClock() async throws {
        let harness = try PluginHarness(plugins: registry())
        defer { harness.shutdown() }
        let client = await harness.connect()
        await client.send("1 SAVE doc a")  // leading: runs
        await harness.advance(by: .milliseconds(10))
        #expect(client.takeReplies() == ["1 OK saved=1"])
        await client.send("2 SAVE doc ab")
        await client.send("3 SAVE doc abc")  // replaces 2
        #expect(client.takeReplies() == ["2 SUPERSEDED"])
        await harness.advance(by: .milliseconds(489))
        #expect(client.takeReplies().isEmpty)
        await harness.advance(by: .milliseconds(1))  // window ends: trailing run of 3
        await harness.advance(by: .milliseconds(10))
        #expect(client.takeReplies() == ["3 OK saved=3"])
        #expect(await client.request("4 SAVE doc") == "4 ERR usage SAVE")
        #expect(await client.request("5 SAVE doc ") == "5 ERR empty-edit")
        #expect(await client.request("6 STATS") == "6 OK saves=2 cancelled=0 keys=1 connections=1")
    }

    @Test func registersAndRunsOverRealSockets() async throws {
        let group = try EventLoopGroup(loopCount: 2, namePrefix: "example")
        defer { group.shutdownGracefully() }
        let server = try GateServer(
            group: group, configuration: GateConfiguration(tcp: TCPConfiguration(port: 0)), plugins: registry())
        let port = try await server.start()
        let client = try LineClient(port: port)
        try client.send("1 save notes hello\n2 SAVE notes hello world\n")
        #expect(try client.readLine() == "1 OK saved=5")
        #expect(try client.readLine() == "2 OK saved=11")  // trailing, ~500 ms later
        await server.drain()
    }

    @Test func theRegistryRefusesClashingPlugins() throws {
        var plugins = try registry()
        #expect(throws: GateError.self) { try plugins.register(AutosavePlugin()) }
        struct Ping: GatePlugin {
            let name = "ping"
            let verb = "ping"
            let policy = GatePolicy.unrestricted
            func parse(_ arguments: Substring) throws(RequestError) -> String { "" }
            func key(for input: String) -> String { input }
            func handle(_ input: String, context: EffectContext) async throws -> String { input }
            func reply(for output: String) -> PluginReply { "OK" }
        }
        #expect(throws: GateError.self) { try plugins.register(Ping()) }
    }
}
