extension SluiceLoop {
    /// Runs `body` on the loop thread and returns its result.
    public func submit<Result: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> Result
    ) async throws(Failure) -> Result {
        if inEventLoop { return try body() }
        // The result travels from the loop thread to this task through the continuation and,
        // for a task on the global executor, libdispatch: a real happens-before edge that
        // ThreadSanitizer cannot see, so it is annotated.
        let handOff = SanitizerHandOff.make()
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Swift.Result<Result, Failure>, Never>) in
            execute {
                let result: Swift.Result<Result, Failure>
                do throws(Failure) {
                    result = .success(try body())
                } catch {
                    result = .failure(error)
                }
                handOff?.release()
                continuation.resume(returning: result)
            }
        }
        handOff?.acquire()
        return try outcome.get()
    }
}
