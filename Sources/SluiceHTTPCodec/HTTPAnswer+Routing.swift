import HTTPTypes

extension HTTPAnswer {
    /// 404 `not-found` for a request whose path no route answers.
    package static func noRoute(method: HTTPRequest.Method, path: String) -> HTTPAnswer {
        HTTPProblem(.notFound, "not-found", detail: "no route for \(method.rawValue) \(path)").answer
    }

    /// 405 `method-not-allowed` for a path whose routes answer other methods, with `Allow`
    /// naming them.
    package static func methodNotAllowed(_ allowed: [String]) -> HTTPAnswer {
        let list = allowed.joined(separator: ", ")
        var answer = HTTPProblem(.methodNotAllowed, "method-not-allowed", detail: "this path answers \(list)").answer
        answer.fields[.allow] = list
        return answer
    }
}
