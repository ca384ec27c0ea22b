// Package audit checks a compaction's summary against the history it
// replaced and says, deterministically, which references and open items the
// summary no longer holds.
//
// That is its one job. It reads text and a few structured fields of tool
// calls, with documented grammars and no model and no network; it knows
// nothing of transports, emitters or records. The kits and the proxy (which
// see both sides of a compaction) put its result in the compaction's record;
// `acpcompact audit` runs it over a recorded transcript.
//
// # What it extracts
//
// Every grammar is conservative: where a string could be a reference or
// not, it is not one, because a reported loss that is not really a loss (a
// false positive) is the failure users would hate most. Text is read token
// by token (a token is a run of non-space characters, with the punctuation
// around it and a markdown link's brackets taken off), and each token is one
// reference at most, tried in this order:
//
//   - url: a scheme among http, https, file, ftp, ssh, git, ws and wss,
//     "://", a host, then URL characters; trailing punctuation and an
//     unbalanced ")" are not part of it.
//   - issue: "#N", "owner/repo#N" or "GH-N" (N of 1 to 6 digits), and N
//     after the words "PR", "issue", "ticket" or "pull request".
//   - error-code: an errno name (ENOENT, EACCES, ... a fixed list), a
//     compiler or linter code (E0308, TS2345, SA1019, SC2086, F401, ...: a
//     fixed list of prefixes, then 3 to 5 digits), a JSON-RPC error code
//     (-32000 to -32999), a Node.js ERR_ code, "HTTP N" (N after "HTTP",
//     "status" or "status code", 100 to 599), "exit status N" / "exit code N".
//   - checksum: an algorithm-prefixed hex digest (sha256:…, sha1:…, md5:…)
//     or 32, 64, 96 or 128 hex digits; commit: 7 to 40 hex digits other than
//     those. Either needs a digit and a letter and one letter case, and no
//     letter, digit, "_" or "-" around it (a UUID is neither).
//   - version: "v" or "V" and two to four numeric parts ("v1.2"); a bare
//     three-part version "1.2.3" whose first part has at most 3 digits and
//     which is not part of a longer dotted number (an IP address is not a
//     version); a two-part one only after the words "version", "release" or
//     "ver"; "package@1.2.3". Each may carry a "-pre" or "+build" suffix. A
//     number after "section", "chapter", "step", "figure", "table", "rule",
//     "item", "paragraph", "clause", "appendix", "part" or "page" is none.
//   - path: an absolute path of two or more segments ("/tmp/x"; "/compact"
//     is a command, not a path), "~/", "./" or "../" and a segment, a
//     relative path of two or more segments whose last has an extension or
//     which ends in "/", or a bare file name with a well-known extension
//     ("main.go", "README.md"; a short list of products such as "Node.js"
//     excluded). A ":line[:column]" or "#Lline" suffix is not part of it.
//     From tool calls, every locations[].path and every string member of
//     rawInput named path, file_path, filePath, filename, file, paths,
//     files, notebook_path, target_file, source or destination, as is; and
//     rawInput's command, as text.
//   - identifier: a markdown code span of one token (no space) that is none
//     of the above, 3 to 100 characters of identifier characters, and not a
//     bare lower-case word of fewer than 4 letters or a common keyword
//     (`true`, `nil`, `return`, ...). Fenced code blocks are not read for
//     identifiers.
//
// # Open items
//
// Open items are read sentence by sentence (sentences end at ". ", "! ",
// "? " and line breaks; list markers are taken off):
//
//   - open-request: a user message, not a slash command ("/compact"), that
//     no agent message (any text at all) followed before the compaction.
//   - open-promise: an agent sentence that begins, after at most one of
//     "next", "then", "later", "also", "afterwards", with "I'll", "I will",
//     "I'm going to", "I am going to", "I shall", "we'll" or "we will" and a
//     verb other than be, wait, need, let, keep, stop or leave; it is a
//     promise when it also names a deferral ("later", "follow up", "next
//     time", "once you", "when you", "after you", "tomorrow", "separately",
//     "get back to", "circle back", "come back to") or ends the agent's last
//     message of a turn with no tool call after it. A later agent message
//     that shares an anchor with it reports it done.
//   - correction: the latest sentence that corrects a fact: a user sentence
//     beginning "Actually", "Correction", "No,", "I meant", "Sorry, I meant",
//     "To clarify", "Scratch that" or "Wait," that also says "not",
//     "instead", "rather than", "meant", "wrong" or "should be" or carries a
//     reference or a number; an agent sentence beginning "Correction", "I was
//     wrong", "My mistake", "I misspoke" or "I stand corrected".
//
// An open item's anchors are the references and the numbers of two or more
// digits in it or, when it has none, its words of five or more letters that
// are not common words (stemmed: "updated" and "updating" anchor "updat").
// An item without anchors cannot be checked and is never reported.
//
// # Survival
//
// A reference survives when the summary's text contains, ignoring ASCII case,
// its value or one of its normal forms, anywhere:
//
//   - path: its last two segments after cleaning ("/work/repo/cmd/x/main.go"
//     survives as "x/main.go", "cmd/x/main.go" or the whole path);
//   - url: without scheme, "www.", fragment and trailing "/";
//   - commit and checksum: the first 7 hex digits (a prefix of a hash, in
//     either direction, is the hash);
//   - version: without the "v" (and without the package of "pkg@1.2.3");
//   - issue: "#N", "pull/N", "issues/N", "PR N", "issue N", "GH-N";
//   - identifier: without a trailing "()" or leading dashes, or its last
//     ".", "::" or "/" component of four or more characters;
//   - error-code: the code, or the number of an HTTP status or exit status;
//   - open items: any one anchor.
//
// Containment is deliberately generous ("#12" survives in "#123"): it can
// only hide a loss, never invent one.
//
// # Cost
//
// Adding history is linear in its size; checking a summary builds a suffix
// automaton of the summary (the small side, linear in it) and looks each
// reference's normal forms up in it, linear in the history. Memory is
// bounded by the distinct references held (WithMaxReferences) and a fixed
// number of open items.
package audit
