import Sluice
import SluiceLineProtocol
import SluicePluginTesting
import SluiceTestSupport
import Testing

/// A plugin written outside `Plugins/`, against the public API only: a document is autosaved at
/// most once per 500 ms, and the latest edit of a window is saved when the window ends (a
/// leading + trailing throttle). The plugin is domain only; `SaveLineCodec` is its line front:
/// `SAVE <doc> <text>` → `OK saved=<bytes>`.
struct AutosavePlugin: GatePlugin {
    struct Edit: Sendable {
        let document: String
        let text: String
    }

    let name = "save"
    let policy: GatePolicy
    let saves = PluginCounter("saves")

    init() throws {
        policy = .throttle(try ThrottleOptions(interval: .milliseconds(500), leading: true, trailing: true))
    }

    func key(for input: Edit) -> String { input.document }

    func run(_ input: Edit, context: EffectContext) async throws -> Int {
        try await context.sleep(for: .milliseconds(10))  // the disk
        saves.increment()
        return input.text.utf8.count
    }
}

struct SaveLineCodec: LineCodec {
    typealias Plugin = AutosavePlugin

    let verb = "SAVE"
    let counters: [PluginCounter]

    init(_ plugin: AutosavePlugin) {
        counters = [plugin.saves]
    }

    func decode(_ arguments: Substring) throws(RequestError) -> AutosavePlugin.Edit {
        guard let space = arguments.firstIndex(of: " "), let document = RequestLine.key(arguments[..<space]) else {
            throw .usage
        }
        let text = arguments[arguments.index(after: space)...]
        guard !text.isEmpty else { throw .invalid("empty-edit", message: "nothing to save") }
        return AutosavePlugin.Edit(document: document, text: String(text))
    }

    func encode(_ output: Int, _ info: RunInfo, into reply: inout LineReply) {
        reply.append("OK saved=")
        reply.append(output)
    }
}

/// A codec that tries to write what a one-line reply cannot hold.
struct LeakyLineCodec: LineCodec {
    typealias Plugin = AutosavePlugin

    let verb = "LEAK"

    func decode(_ arguments: Substring) throws(RequestError) -> AutosavePlugin.Edit {
        AutosavePlugin.Edit(document: "doc", text: String(arguments))
    }

    func encode(_ output: Int, _ info: RunInfo, into reply: inout LineReply) {
        reply.append("OK first line\n999 OK forged")
    }
}

@Suite struct ExamplePluginTests {
    private func registry() throws -> (PluginRegistry, LineVerbs, PluginHandle<AutosavePlugin>) {
        var plugins = PluginRegistry()
        var verbs = LineVerbs()
        let save = try plugins.register(AutosavePlugin())
        try verbs.register(SaveLineCodec(save.plugin), for: save)
        return (plugins, verbs, save)
    }

    @Test func leadingAndTrailingThrottleOnAManualClock() async throws {
        let (plugins, verbs, _) = try registry()
        let harness = try LineHarness(plugins: plugins, verbs: verbs)
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
        #expect(await client.request("6 STATS") == "6 OK saves=2 cancelled=0 evicted=0 keys=1 connections=1")
    }

    @Test func aDueTimerIsDeliveredBeforeAnEventOfTheSameIteration() async throws {
        let (plugins, verbs, _) = try registry()
        let harness = try LineHarness(plugins: plugins, verbs: verbs)
        defer { harness.shutdown() }
        let client = await harness.connect()
        await client.send("1 SAVE doc a")
        await client.send("2 SAVE doc ab")  // held for the trailing run at +500 ms
        // The socket callback runs at +500 ms before the timer callback of that iteration.
        harness.clock.advanceWithoutFiring(by: .milliseconds(500))
        await client.send("3 SAVE doc abc")
        await harness.advance(by: .milliseconds(10))
        // 2's window ended before 3 arrived: 2 ran (not superseded); 3 waits for the next window.
        #expect(client.takeReplies() == ["1 OK saved=1", "2 OK saved=2"])
        await harness.advance(by: .milliseconds(500))
        #expect(client.takeReplies() == ["3 OK saved=3"])
    }

    @Test func theSamePluginThroughTheTypedAPI() async throws {
        let (plugins, _, save) = try registry()
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        let ticket = await harness.gate.start(harness.gate.request(save, AutosavePlugin.Edit(document: "d", text: "hello")))
        await harness.advance(by: .milliseconds(10))
        #expect(try await ticket.settledOutcome().output == 5)
    }

    @Test func registersAndRunsOverRealSockets() async throws {
        let (plugins, verbs, _) = try registry()
        let group = try SluiceLoopGroup(loopCount: 2, namePrefix: "example")
        defer { group.shutdownGracefully() }
        let gate = try Gate(group: group, plugins: plugins)
        let server = try LineServer(gate: gate, verbs: verbs, configuration: LineConfiguration(tcp: TCPConfiguration(port: 0)))
        let port = try await server.start()
        let client = try LineClient(port: port)
        try client.send("1 save notes hello\n2 SAVE notes hello world\n")
        #expect(try await client.readLine() == "1 OK saved=5")
        #expect(try await client.readLine() == "2 OK saved=11")  // trailing, ~500 ms later
        await server.stopAccepting()
        await gate.shutdown()
    }

    @Test func aCodecCannotForgeASecondReplyLine() async throws {
        var plugins = PluginRegistry()
        let save = try plugins.register(AutosavePlugin())
        var verbs = LineVerbs()
        try verbs.register(LeakyLineCodec(), for: save)
        let harness = try LineHarness(plugins: plugins, verbs: verbs)
        defer { harness.shutdown() }
        let client = await harness.connect()
        await client.send("1 LEAK x")
        await harness.advance(by: .milliseconds(10))
        #expect(client.takeReplies() == ["1 ERR bad-reply"])
    }

    @Test func theRegistriesRefuseClashingNamesAndVerbs() throws {
        var (plugins, verbs, save) = try registry()
        #expect(throws: SluiceError.self) { try plugins.register(AutosavePlugin()) }
        #expect(throws: SluiceError.self) { try verbs.register(SaveLineCodec(save.plugin), for: save) }
        struct Ping: LineCodec {
            typealias Plugin = ProbePlugin<String>
            let verb = "ping"
            func decode(_ arguments: Substring) throws(RequestError) -> Probe { Probe(key: "k") }
            func encode(_ output: String, _ info: RunInfo, into reply: inout LineReply) {}
        }
        let probe = try plugins.register(ProbePlugin("other", policy: .unrestricted, immediate))
        do {
            try verbs.register(Ping(), for: probe)
            Issue.record("PING is the server's own verb")
        } catch {
            #expect(error.code == .reservedVerb)
        }
        #expect(throws: SluiceError.self) { try plugins.register(ProbePlugin("", policy: .unrestricted, immediate)) }
    }

    /// A plugin registered after the gate was made would be unknown to it: the registry says so
    /// at once, rather than the gate answering `busy` to every request.
    @Test func registeringAfterTheGateWasMadeIsAnError() throws {
        var plugins = PluginRegistry()
        _ = try plugins.register(ProbePlugin("first", policy: .unrestricted, immediate))
        let harness = try GateHarness(plugins: plugins)
        defer { harness.shutdown() }
        do {
            _ = try plugins.register(ProbePlugin("late", policy: .unrestricted, immediate))
            Issue.record("a plugin registered after the gate was made was accepted")
        } catch {
            #expect(error.code == .registryInUse)
            #expect(error.value == "late")
        }
    }
}
