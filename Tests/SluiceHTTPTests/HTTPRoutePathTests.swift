import HTTPTypes
import Sluice
import SluiceButtonTap
import SluiceHTTP
import Testing

@Suite struct HTTPRoutePathTests {
    static let refused: [String] = [
        "", "pay", "/with space", "/tab\there", "/nul\u{0}", "/del\u{7F}", "/query?x=1", "/é",
        "/" + String(repeating: "a", count: HTTPRoutePath.maximumLength),
    ]

    @Test(arguments: refused)
    func aPathNoRouteMayHaveIsRefused(_ text: String) {
        #expect(throws: SluiceError.self) { try HTTPRoutePath(text) }
        do {
            _ = try HTTPRoutePath(text)
        } catch {
            #expect(error.code == .invalidPlugin)
            #expect(error.value == text)
        }
    }

    @Test func theLongestPathIsTaken() throws {
        let text = "/" + String(repeating: "a", count: HTTPRoutePath.maximumLength - 1)
        #expect(try HTTPRoutePath(text).text == text)
    }

    /// (route, request path, rest or nil when the route does not match)
    static let matches: [(String, String, String?)] = [
        ("/pay", "/pay", ""),
        ("/pay", "/pay/", nil),
        ("/pay", "/payment", nil),
        ("/pay", "/pa", nil),
        ("/tap/", "/tap/abc", "abc"),
        ("/tap/", "/tap/", ""),
        ("/tap/", "/tap", nil),
        ("/tap/", "/tap/a/b", "a/b"),
        ("/tap/", "/other/abc", nil),
        ("/", "/anything", "anything"),
    ]

    @Test func aRouteMatchesItsPathExactlyOrAsAPrefix() throws {
        for (route, path, rest) in Self.matches {
            let routePath = try HTTPRoutePath(route)
            #expect(routePath.isPrefix == route.hasSuffix("/"))
            #expect(routePath.rest(of: path[...]).map(String.init) == rest, "\(route) on \(path)")
        }
    }

    @Test func theFrontRefusesWhatTheRoutePathRefuses() throws {
        var plugins = PluginRegistry()
        let tap = try plugins.register(try ButtonTapPlugin())
        var routes = HTTPRoutes()
        for text in Self.refused {
            #expect(throws: SluiceError.self, "\(text)") { try routes.register(HTTPRoutesTests.PathCodec(path: text), for: tap) }
        }
        #expect(routes.descriptions.isEmpty)
    }
}
