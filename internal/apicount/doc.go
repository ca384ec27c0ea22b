// Package apicount holds the test that counts the exported API of the
// packages whose size issue 19 bounds, and fails when a count grows past
// its limit. It has no code of its own.
//
// What counts, read from the packages' non-test source files: every
// exported package-level constant, variable, function and type, and every
// exported method of an exported type. Struct fields and the methods an
// interface declares are not counted: they are the shape of a type that
// is counted already.
//
//   - emitter: all of it.
//   - The kit path, per kit (agentkit, agentkit/acpsdk): the names a
//     runtime touches to report a compaction: the functions and methods
//     that return a Session (SessionFrom; before it, Kit.Session), the
//     Session type and its methods, Recover (a function or a method), and
//     the package's exported variables (its sentinel errors). The limit is
//     on the two kits together. A name of one kit that is an alias of the
//     same name of the other (`type Session = agentkit.Session`, `var
//     ErrClosed = agentkit.ErrClosed`) is that name, counted once; a
//     function that forwards counts.
//
// `go test -v ./internal/apicount` prints each count and its names.
package apicount
