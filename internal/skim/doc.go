// Package skim has one job: reading the few members a host needs from one
// JSON-RPC message (its id, method, params.sessionId, params.update...) in
// one pass that also validates the whole message, and comparing JSON values
// such as request ids by value rather than by spelling. It is the JSON
// reading layer of the hot path that the proxy and the agent kits share.
//
// A message is one line of up to 64 MiB, and most of it (a streamed text, a
// compaction summary) is of no interest. encoding/json would validate the
// whole document and then decode it, and do so again for each nested
// json.RawMessage; a [Picker] instead validates the message once, with
// encoding/json's grammar and nesting limit (10000), and hands out raw
// sub-slices of the members asked for, so that only those small values are
// decoded ([String], [IsNull], [IDKey]). In the unbounded mode (a Picker
// with Unbounded set, [PickPrefixUnbounded]) there is no nesting limit.
//
// # What is accepted
//
// A message is valid exactly when [encoding/json.Valid] accepts it: strings
// may hold invalid UTF-8 and unpaired surrogate escapes (as encoding/json
// allows), and duplicate member names are allowed. Nesting deeper than
// 10000 arrays and objects is refused with [ErrTooDeep], as encoding/json
// refuses it. Invalid input is reported with an error that wraps
// [ErrSyntax]; a valid JSON value that is not an object with [ErrNotObject].
//
// JavaScript's JSON.parse has no nesting limit, so a peer that reads with
// it (the TypeScript SDK) reads a message nested 10001 deep that
// encoding/json refuses; a host that must see what such a peer sees (the
// proxy, which would otherwise pass the message on unexamined) reads in
// the unbounded mode: [Picker.Unbounded], [PickPrefixUnbounded]. The
// grammar and the values picked are the same; nesting is not limited, and
// the values deeper than 10000 levels are read without recursion, with a
// bit of memory per level. The zero Picker, [PickPrefix] and [ReadHead]
// keep encoding/json's limit, for hosts whose stacks decode with it (the
// agent kits).
//
// # How member names match
//
// Names are compared after decoding their escapes, so "\u0069d" is "id".
// A repeated member keeps its last value, and the paths below a repeated
// member are read from that last value only (an earlier one's members do
// not survive: the member was replaced).
//
// A path set made by [Compile] matches names exactly, as the proxy always
// has (ACP's names are case-sensitive) and as encoding/json does when it
// decodes into a map or an any. A set made by [CompileFold] matches them
// as encoding/json matches a struct field's name: an exact match first,
// else a case-insensitive one ("ID" and "Id" match "id"; folding is
// Unicode's, so the Kelvin sign U+212A matches "k" and the long s U+017F
// matches "s", as in encoding/json); this is how the kits read a message
// today, with encoding/json structs. One difference remains from a struct decode:
// below a repeated member, encoding/json decodes the later object into the
// struct the earlier one filled, merging the two, where a fold set reads
// the last one only, as a map decode does.
//
// Request ids are compared with [IDKey], by JSON value as the clients
// compare them: "init-é" and "init-\u00e9" are the same id; numbers are
// compared by the double they round to, as JavaScript's JSON.parse and a
// Map (and encoding/json's float64) compare them, so 1, 1.0 and 1e0 are one
// id, 0 and -0 are one id, and integers beyond 2^53 that round to the same
// double are one id; 1 and "1" are not.
//
// # Implementation
//
// The reader is hand-written (the skimmer that the proxy had), measured
// against one built on github.com/go-json-experiment/json/jsontext, the
// upstream of encoding/json/v2: on ACP's short lines jsontext's per-message
// and per-token costs made the proxy spend a quarter to a half more CPU per
// line, over the 10% a shared library was allowed to cost. The jsontext
// reader is kept in the tests (text_test.go) as the benchmarks' baseline
// and the fuzz tests' second implementation; README.md has the numbers and
// the commands that reproduce them.
//
// [PickPrefix] is the same reader in a partial mode: the grammar is written
// once, and where the input runs out inside a value, which for Pick is
// invalid input, the partial mode reports the value cut instead.
package skim
