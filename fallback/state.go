package fallback

import (
	"sync"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// streamKey names one compaction as the renderer sees it: IDs are unique
// within a session.
type streamKey struct {
	session string
	id      protocol.ID
}

func keyOf(ev emitter.Event) streamKey {
	return streamKey{ev.SessionID, ev.ID}
}

// streams keeps what was streamed for each open compaction, for renderers
// that must show a summary the terminal event leaves omitted ("keep what
// was streamed"). The emitter hands renderers no accumulated summary (it
// keeps chunks only for OnFinalRecord's records, and only when asked), so
// a renderer that shows the summary keeps it. Entries live from the first
// chunk to the terminal event; the emitter guarantees that event, so
// nothing leaks.
type streams struct {
	mu sync.Mutex
	m  map[streamKey][]protocol.ContentBlock
}

// add appends b to what ev's compaction streamed. With snapshot it returns
// a copy of everything accumulated so far, for a carrier that can only
// replace its content, never append to it.
func (s *streams) add(ev emitter.Event, b protocol.ContentBlock, snapshot bool) []protocol.ContentBlock {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[streamKey][]protocol.ContentBlock)
	}
	k := keyOf(ev)
	bs := appendBlock(s.m[k], b)
	s.m[k] = bs
	if !snapshot {
		return nil
	}
	return append([]protocol.ContentBlock(nil), bs...)
}

// take removes and returns what was streamed for ev's compaction.
func (s *streams) take(ev emitter.Event) []protocol.ContentBlock {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(ev)
	bs := s.m[k]
	delete(s.m, k)
	return bs
}

// len reports how many compactions hold buffered content, for tests.
func (s *streams) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// summaryOf resolves what the client's summary is after a terminal event,
// applying the RFD's patch rule to what was streamed: a concrete summary
// replaces it, null clears it, omission keeps it.
func summaryOf(ev emitter.Event, streamed []protocol.ContentBlock) []protocol.ContentBlock {
	if bs, ok := ev.Summary.Get(); ok {
		return mergeBlocks(bs)
	}
	if ev.Summary.IsNull() {
		return nil
	}
	return streamed
}
