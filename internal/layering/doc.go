// Package layering holds the test that keeps the module's imports one-way:
// no production package imports anything under test/, the vocabulary,
// capability, lifecycle and rendering packages know nothing of transports
// or hosts, and the conformance oracle shares no code with the engine it
// checks. It has no code of its own.
package layering
