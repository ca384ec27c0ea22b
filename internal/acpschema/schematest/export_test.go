package schematest

// ResetNote forgets that the skip was logged, so a test can see the first
// log again under -count.
func ResetNote() { noted.Store(false) }
