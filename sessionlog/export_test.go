package sessionlog

// RawLine returns a checksummed line holding members (a JSON object's
// members, without braces), as a writer of this format writes it.
func RawLine(members string) []byte { return finishLine(append(newLine(len(members)), members...)) }
