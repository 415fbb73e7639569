import Foundation
import Testing

/// The ```swift blocks of a Markdown text, in order, each without its final line break.
func swiftBlocks(in text: Substring) -> [String] {
    var blocks: [String] = []
    var rest = text
    while let open = rest.range(of: "```swift\n") {
        guard let close = rest[open.upperBound...].range(of: "\n```") else { break }
        blocks.append(String(rest[open.upperBound..<close.lowerBound]))
        rest = rest[close.upperBound...]
    }
    return blocks
}

/// Every Swift sample in the DocC articles is code that compiles: each appears, character for
/// character, in a source file of the repository's examples or tests, which the build compiles
/// (and the tests run).
@Suite struct DocumentationSampleTests {
    private static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The files under `folders` whose name ends with `suffix`.
    private static func files(under folders: [String], endingWith suffix: String) -> [URL] {
        folders.flatMap { folder -> [URL] in
            let enumerator = FileManager.default.enumerator(at: root.appendingPathComponent(folder), includingPropertiesForKeys: nil)
            return (enumerator?.allObjects as? [URL] ?? []).filter { $0.lastPathComponent.hasSuffix(suffix) }
        }
    }

    @Test func everySwiftSampleOfAnArticleIsCompiledCode() throws {
        let articles = Self.files(under: ["Sources", "Plugins"], endingWith: ".md").filter { $0.path.contains(".docc/") }
        #expect(!articles.isEmpty)
        let compiled = try Self.files(under: ["Examples", "Tests"], endingWith: ".swift").map {
            try String(contentsOf: $0, encoding: .utf8)
        }
        var samples = 0
        for article in articles {
            for block in swiftBlocks(in: try String(contentsOf: article, encoding: .utf8)[...]) {
                samples += 1
                #expect(compiled.contains { $0.contains(block) }, "a sample of \(article.lastPathComponent) is in no compiled file: \(block.prefix(80))")
            }
        }
        #expect(samples >= 4)
    }

    /// The README's Hummingbird section is the example app's code: its first Swift block is
    /// `Examples/HummingbirdApp/main.swift` without the `#if Hummingbird` … `#endif` that keeps
    /// the file empty when the trait is off.
    @Test func theReadmesHummingbirdSectionIsTheExampleAppsCode() throws {
        let example = try String(contentsOf: Self.root.appendingPathComponent("Examples/HummingbirdApp/main.swift"), encoding: .utf8)
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "## Using Sluice with Hummingbird"))
        let block = try #require(swiftBlocks(in: readme[section.upperBound...]).first)
        #expect("#if Hummingbird\n" + block + "\n#endif\n" == example)
    }
}
