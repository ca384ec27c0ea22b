package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/protocol"
)

// chunkReader returns at most a few random bytes per read, as a pipe does.
type chunkReader struct {
	b []byte
	r *rand.Rand
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.b), 1+c.r.IntN(200<<10))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

func filled(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + (seed+byte(i))%26
	}
	return b
}

// Lines of every size, read in pieces, come out whole and unchanged,
// through the read buffer, acc and the blocks; a line over the limit
// comes as a head and its rest.
func TestLineReaderReadsLinesOfEverySize(t *testing.T) {
	sizes := []int{10, readBufSize - 1, readBufSize + 1, 300 << 10, keepAccMax - 1, keepAccMax, keepAccMax + 1,
		bigBlock*3 + 7, 5 << 20, 10}
	var in bytes.Buffer
	var want [][]byte
	for i, n := range sizes {
		l := append(filled(n, byte(i)), '\n')
		want = append(want, l)
		in.Write(l)
	}
	in.WriteString("last, without terminator")
	lr := newLineReader(&chunkReader{b: in.Bytes(), r: rand.New(rand.NewPCG(1, 2))}, 64<<20)
	var kept [][]byte // lines detach handed over must never change
	var keptWant [][]byte
	for i, w := range want {
		line, long, err := lr.next()
		if err != nil || long {
			t.Fatalf("line %d: long %v, err %v", i, long, err)
		}
		if !bytes.Equal(line, w) {
			t.Fatalf("line %d (%d bytes): got %d bytes, not the line", i, len(w), len(line))
		}
		if lr.detach(line[1:]) {
			kept, keptWant = append(kept, line), append(keptWant, bytes.Clone(line))
		} else if len(w) > readBufSize {
			t.Errorf("line %d (%d bytes) outgrew the read buffer but was not handed over", i, len(w))
		}
	}
	line, _, err := lr.next()
	if err != io.EOF || string(line) != "last, without terminator" {
		t.Fatalf("last line %q, %v", line, err)
	}
	for i := range kept {
		if !bytes.Equal(kept[i], keptWant[i]) {
			t.Errorf("a line handed over by detach was overwritten")
		}
	}
	if len(kept) < 5 {
		t.Errorf("only %d lines handed over", len(kept))
	}

	// Over the limit: a head, then the rest.
	big := append(filled(3<<20, 0), '\n')
	lr = newLineReader(&chunkReader{b: append(bytes.Clone(big), "next\n"...), r: rand.New(rand.NewPCG(3, 4))}, 1<<20)
	head, long, err := lr.next()
	if err != nil || !long || len(head) <= 1<<20 || !bytes.Equal(head, big[:len(head)]) {
		t.Fatalf("head: long %v, %d bytes, err %v", long, len(head), err)
	}
	rest := bytes.Clone(head)
	if err := lr.copyRest(func(b []byte) error { rest = append(rest, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rest, big) {
		t.Fatal("head and rest are not the line")
	}
	if line, _, _ := lr.next(); string(line) != "next\n" {
		t.Fatalf("after the long line: %q", line)
	}
}

// A line still in the read buffer is not handed over: the next read
// overwrites it.
func TestLineReaderKeepsTheReadBuffer(t *testing.T) {
	lr := newLineReader(strings.NewReader("short\nnext\n"), 1<<20)
	line, _, _ := lr.next()
	if lr.detach(line) {
		t.Fatal("a line in the read buffer was handed over")
	}
}

// decodeUpdate reads every long update exactly as protocol.UnmarshalUpdate
// does, whatever its long strings hold and wherever they are.
func TestDecodeUpdateMatchesUnmarshalUpdate(t *testing.T) {
	long := string(filled(longUpdate, 1))
	esc := strings.Repeat(`tab\there \"quoted\" \u00e9 \ud800 `, longUpdate/30)
	bad := strings.Repeat("bad \xff\xfe utf8 ", longUpdate/12)
	mark := `\u0000acpcompact-hole:0`
	for _, tc := range []struct{ name, raw string }{
		{"summary text", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + long + `"}]}`},
		{"escaped text", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + esc + `"}]}`},
		{"invalid UTF-8", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + bad + `"}]}`},
		{"blocks", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + long + `"},{"type":"image","mimeType":"image/png","data":"` + long + `","_meta":{"k":["` + long + `"]}},{"type":"text","text":"short"}]}`},
		{"error and meta", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"failed","error":"` + long + `","_meta":{"x":"` + long + `","y":{"z":"` + esc + `"}}}`},
		{"member name", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","_meta":{"` + long + `":1}}`},
		{"chunk", ` {"sessionUpdate" : "compaction_summary_chunk", "compactionId":"c1","content":{"type":"text","text" : "` + long + `" , "annotations":{"a":"` + long + `"}}} `},
		{"unknown member", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","future":"` + long + `"}`},
		{"stand-in look-alike", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + mark + `"},{"type":"text","text":"` + long + `"}]}`},
		{"long id", `{"sessionUpdate":"compaction_update","compactionId":"` + long + `","status":"completed"}`},
		{"not compaction", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + long + `"}}`},
		{"unterminated", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + long},
		{"not a string", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":["` + long + `"]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, own := range []bool{false, true} {
				raw := []byte(tc.raw)
				want, werr := protocol.UnmarshalUpdate(raw)
				got, gerr := decodeUpdate(raw, func([]byte) bool { return own })
				if (werr == nil) != (gerr == nil) {
					t.Fatalf("own %v: error %v, protocol.UnmarshalUpdate's %v", own, gerr, werr)
				}
				if werr == nil && !reflect.DeepEqual(got, want) {
					t.Fatalf("own %v: decoded differently from protocol.UnmarshalUpdate", own)
				}
			}
		})
	}
}
