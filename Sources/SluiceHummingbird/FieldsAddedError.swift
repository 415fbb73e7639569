#if Hummingbird
import HTTPTypes
import Hummingbird

/// An error the rest of the chain threw, with header fields a middleware adds to the answer it
/// becomes (the rate-limit fields on a route's 404, say).
struct FieldsAddedError: HTTPResponseError {
    /// What the chain threw.
    let original: any HTTPResponseError
    /// The fields to add.
    let fields: HTTPFields

    var status: HTTPResponse.Status { original.status }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try original.response(from: request, context: context)
        for field in fields { response.headers[field.name] = field.value }
        return response
    }

    /// Runs `body`; an `HTTPResponseError` it throws leaves with `fields` added, any other error
    /// leaves as it was thrown.
    static func adding(_ fields: HTTPFields, _ body: () async throws -> Response) async throws -> Response {
        do {
            var response = try await body()
            for field in fields { response.headers[field.name] = field.value }
            return response
        } catch let error as any HTTPResponseError {
            throw FieldsAddedError(original: error, fields: fields)
        }
    }
}
#endif
