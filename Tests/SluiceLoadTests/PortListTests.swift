import ArgumentParser
import SluiceLoadCore
import Testing

@Suite("--port lists")
struct PortListTests {
    @Test("one port works as before; a list keeps its order; spaces around entries are ignored")
    func lists() throws {
        let single = try LoadOptions.parse(["--port", "7171"]).configuration()
        #expect(single.ports == [7171])
        #expect(single.port == 7171)
        #expect(try parsePortList("7000,7001,7002") == [7000, 7001, 7002])
        #expect(try parsePortList("7002, 7000 ,7001") == [7002, 7000, 7001])
        #expect(try parsePortList("1,65535") == [1, 65535])
        let listed = try LoadOptions.parse(["--port", "7000,7001,7002"]).configuration()
        #expect(listed.ports == [7000, 7001, 7002])
        #expect(listed.port == 7000)
    }

    @Test("the default is one port: 7070, or 8080 with --http; --http takes a list too")
    func defaults() throws {
        #expect(try LoadOptions.parse([]).configuration().ports == [7070])
        #expect(try LoadOptions.parse(["--http"]).configuration().ports == [8080])
        let http = try LoadOptions.parse(["--http", "--port", "8081,8082"]).configuration()
        #expect(http.http)
        #expect(http.ports == [8081, 8082])
    }

    @Test(
        "bad lists are refused, naming the offending entry (or the list, for an empty entry)",
        arguments: [
            ("7000,,7001", "7000,,7001", "entry 2 of the list is empty"),
            (",7000", ",7000", "entry 1 of the list is empty"),
            ("7000,", "7000,", "entry 2 of the list is empty"),
            ("", "", "no port given"),
            (" ", " ", "no port given"),
            ("x", "x", "not a port number"),
            ("7000,abc", "abc", "not a port number"),
            ("7000,70 01", "70 01", "not a port number"),
            ("+7000", "+7000", "not a port number"),
            ("-1", "-1", "not a port number"),
            ("7000.5", "7000.5", "not a port number"),
            ("0", "0", "must be 1...65535"),
            ("7000,65536", "65536", "must be 1...65535"),
            ("99999999999999999999999", "99999999999999999999999", "must be 1...65535"),
            ("7000,7001,7000", "7000", "listed twice"),
            ("7000, 7000", "7000", "listed twice"),
        ])
    func refused(text: String, offending: String, reason: String) throws {
        let error = #expect(throws: LoadError.self) { try parsePortList(text) }
        #expect(error?.input == offending)
        #expect(error?.message.hasPrefix("--port") == true)
        #expect(error?.message.contains(reason) == true, "\(String(describing: error))")
        // The same error through the options, which the command turns into a validation error
        // (`--port=` so that "-1" is not read as an option). An empty value is ArgumentParser's
        // own "missing value" error.
        guard !text.isEmpty else {
            #expect(throws: (any Error).self) { try LoadOptions.parse(["--port=\(text)"]) }
            return
        }
        let options = try LoadOptions.parse(["--port=\(text)"])
        let expected = try #require(error)
        #expect(throws: expected) { try options.configuration() }
    }

    @Test("a configuration built by hand is validated the same way")
    func configurationValidation() {
        var configuration = LoadConfiguration()
        configuration.ports = []
        #expect(throws: LoadError.self) { try configuration.validate() }
        configuration.ports = [7000, 0]
        #expect(throws: LoadError("--port must be 1...65535", input: "0")) { try configuration.validate() }
        configuration.ports = [7000, 7001, 7001]
        #expect(throws: LoadError("--port: port listed twice", input: "7001")) { try configuration.validate() }
        configuration.ports = [7000, 7001]
        #expect(throws: Never.self) { try configuration.validate() }
    }

    @Test("fewer connections than ports is refused: a port would get none")
    func fewerConnectionsThanPorts() throws {
        let options = try LoadOptions.parse(["--port", "7000,7001,7002", "--connections", "2"])
        let error = #expect(throws: LoadError.self) { try options.configuration() }
        #expect(error?.input == "2")
        #expect(error?.message.contains("port 7002 gets no connection") == true)
        #expect(throws: Never.self) { try LoadOptions.parse(["--port", "7000,7001,7002", "--connections", "3"]).configuration() }
    }

    @Test("connections go round-robin over the ports")
    func roundRobin() throws {
        let configuration = try LoadOptions.parse(["--port", "7000,7001,7002", "--connections", "7"]).configuration()
        #expect((0..<7).map(configuration.port(forConnection:)) == [7000, 7001, 7002, 7000, 7001, 7002, 7000])
        #expect(configuration.connectionsPerPort == [3, 2, 2])
        let single = try LoadOptions.parse(["--port", "7000", "--connections", "5"]).configuration()
        #expect((0..<5).map(single.port(forConnection:)) == [7000, 7000, 7000, 7000, 7000])
        #expect(single.connectionsPerPort == [5])
    }
}
