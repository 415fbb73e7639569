import HTTPTypes
import Sluice
import SluiceButtonTap
import SluiceHTTP
import Testing

@Suite struct HTTPRoutesTests {
    /// A codec of a user's plugin at a path of its choosing.
    struct PathCodec: HTTPCodec {
        typealias Plugin = ButtonTapPlugin
        let method = HTTPRequest.Method.post
        let path: String

        func decode(_ request: HTTPRequestView, rest: Substring) throws(HTTPProblem) -> String { String(rest) }
        func encode(_ outcome: GateOutcome<Int>, for input: String) -> HTTPAnswer { HTTPAnswer(status: .ok) }
    }

    @Test func aPathTheFrontAnswersItselfIsRefusedWithTheFrontsOwnCode() throws {
        var plugins = PluginRegistry()
        let tap = try plugins.register(try ButtonTapPlugin())
        var routes = HTTPRoutes()
        for path in HTTPRoutes.reservedPaths.sorted() {
            do {
                try routes.register(PathCodec(path: path), for: tap)
                Issue.record("\(path) is the front's own path")
            } catch {
                #expect(error.code == .reservedPath)
                #expect(error.value == path)
                #expect(error.code.description == "reservedPath")
            }
        }
        try routes.register(PathCodec(path: "/likes/"), for: tap)
    }
}
