import Foundation
import SluiceEmbeddingExample
import SluiceLibevent
import Synchronization
import Testing

/// The embedding example compiles, runs, and is what the README shows.
@Suite struct EmbeddingExampleTests {
    @Test func itRunsAndReportsEveryOutcome() async throws {
        let lines = Mutex<[String]>([])
        try await EmbeddingExample.run { line in lines.withSanitizedLock { $0.append(line) } }
        var reported = lines.withSanitizedLock { $0 }
        // The example runs on the real clock: the third request is refused until 10 s after the
        // first (6 a minute, a burst of 1), less the time the three took, which a loaded machine
        // can stretch past a second. Whole seconds, rounded up: 10 on an idle machine.
        let limited = reported.firstIndex { $0.hasPrefix("limit 3: limited, retry within ") }
        if let limited {
            let seconds = Int(reported[limited].dropFirst("limit 3: limited, retry within ".count).prefix { $0.isNumber })
            #expect(seconds.map { (1...10).contains($0) } == true, "\(reported[limited])")
            reported[limited] = "limit 3: limited, retry within 10 s"
        }
        #expect(reported == [
            "tap 1: ran, tap number 1",
            "tap 2: throttled",
            "payment: executed, retry: replayed, same charge: true",
            "payment with another amount: mismatch",
            "search: cancelled (requested)",
            "limit 1: allowed, remaining 1",
            "limit 2: allowed, remaining 0",
            "limit 3: limited, retry within 10 s",
            "page: feed-0,feed-1,feed-2, loads: 1, second joined: true",
        ])
    }

    @Test func theReadmeShowsTheExamplesCode() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let example = try String(
            contentsOf: root.appendingPathComponent("Examples/Embedding/Sources/SluiceEmbeddingExample/EmbeddingExample.swift"),
            encoding: .utf8)
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "## Embedding Sluice"))
        let block = try #require(swiftBlocks(in: readme[section.upperBound...]).first)
        #expect(block + "\n" == example)
    }
}
