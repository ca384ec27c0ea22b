// Package conformance judges an ACP agent's context-compaction reporting
// against the Session Compaction RFD.
//
// It reads wire transcripts (ReadTranscript, Scanner), holds a session
// timeline the way a conforming client must (Reducer), and flags every
// obligation of the agent that a transcript breaks (Checker,
// CheckTranscript). The Checker is streaming so a live proxy can feed it
// message by message.
package conformance
