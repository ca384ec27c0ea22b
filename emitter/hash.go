package emitter

import "github.com/acpcompact/acpcompact/protocol"

// FNV-1a, 64 bit. The streamed summary is compared with the final one by
// hash so that memory per compaction stays constant.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// hashBlock folds b into the running hash. Adjacent text blocks hash as
// their concatenation, because a client shows streamed text chunks and one
// final text block alike; any other block hashes as a separator plus its
// JSON, so a non-text block never compares equal to text.
func hashBlock(h uint64, b protocol.ContentBlock, first bool) uint64 {
	if first {
		h = fnvOffset
	}
	if b.Type == "text" && len(b.Extra) == 0 {
		return fnvString(h, b.Text)
	}
	raw, err := b.MarshalJSON()
	if err != nil {
		raw = []byte(b.Type)
	}
	h = fnvString(h, "\x00block\x00")
	h = fnvString(h, string(raw))
	return fnvString(h, "\x00")
}

func hashBlocks(bs []protocol.ContentBlock) uint64 {
	h := uint64(fnvOffset)
	for i, b := range bs {
		h = hashBlock(h, b, i == 0)
	}
	return h
}
