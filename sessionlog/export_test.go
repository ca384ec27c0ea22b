package sessionlog

// RawLine returns a checksummed line holding members (a JSON object's
// members, without braces), as a writer of this format writes it.
func RawLine(members string) []byte { return finishLine(append(newLine(len(members)), members...)) }

// CheckHeader judges a log's first line (without its newline; complete:
// it had one) as the log of sessionID.
var CheckHeader = checkHeader
