package conformance_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
)

func TestReadTranscriptAcceptsTheFormat(t *testing.T) {
	in := "# a comment\n" +
		"\n" +
		"client {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\r\n" +
		"   # an indented comment\n" +
		"agent\t{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n" +
		"  client   { \"a\" : [1, 2] }  \n" +
		"   \t \n" +
		"agent {\"last\":\"no newline\"}"
	lines, errs := conformance.ReadTranscript(strings.NewReader(in))
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	want := []conformance.Line{
		{N: 3, Dir: conformance.FromClient, Raw: []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)},
		{N: 5, Dir: conformance.FromAgent, Raw: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)},
		{N: 6, Dir: conformance.FromClient, Raw: []byte(`{ "a" : [1, 2] }`)},
		{N: 8, Dir: conformance.FromAgent, Raw: []byte(`{"last":"no newline"}`)},
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines: %v", len(lines), lines)
	}
	for i, w := range want {
		g := lines[i]
		if g.N != w.N || g.Dir != w.Dir || !bytes.Equal(g.Raw, w.Raw) {
			t.Errorf("line %d = {%d %v %s}, want {%d %v %s}", i, g.N, g.Dir, g.Raw, w.N, w.Dir, w.Raw)
		}
	}
	if got := lines[1].String(); got != `agent {"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("String() = %q", got)
	}
}

func TestReadTranscriptReportsMalformedLinesByNumber(t *testing.T) {
	in := strings.Join([]string{
		`client {"ok":1}`,
		`server {"jsonrpc":"2.0"}`, // unknown prefix
		`{"jsonrpc":"2.0"}`,        // no prefix
		`client{"jsonrpc":"2.0"}`,  // prefix glued to the JSON
		`agent`,                    // prefix only
		`agent {"jsonrpc":`,        // truncated JSON
		`agent {"a":1} trailing`,   // garbage after the object
		`agent "a string"`,         // not an object
		`agent null`,               // not an object
		"agent {\"bad\":\"\xff\"}", // invalid UTF-8 is tolerated, as encoding/json does
		`agent {"ok":2}`,
	}, "\n")
	lines, errs := conformance.ReadTranscript(strings.NewReader(in))
	wantErrLines := []int{2, 3, 4, 5, 6, 7, 8, 9}
	if len(errs) != len(wantErrLines) {
		t.Fatalf("errors: %v", errs)
	}
	for i, err := range errs {
		var le *conformance.LineError
		if !errors.As(err, &le) || le.N != wantErrLines[i] {
			t.Errorf("error %d = %v, want a *LineError for line %d", i, err, wantErrLines[i])
			continue
		}
		if !strings.HasPrefix(err.Error(), "line ") {
			t.Errorf("error text %q does not name the line", err)
		}
	}
	if len(lines) != 3 || lines[0].N != 1 || lines[1].N != 10 || lines[2].N != 11 {
		t.Errorf("lines: %v", lines)
	}
}

func TestScannerLineLengthBoundary(t *testing.T) {
	// `agent {"a":"xx"}` is 16 bytes.
	in := "agent {\"a\":\"xx\"}\r\n" + // exactly the limit; \r\n does not count
		"agent {\"a\":\"xxx\"}\n" + // one byte over
		"agent {\"a\":\"" + strings.Repeat("y", 200_000) + "\"}\n" + // far over, spanning buffer refills
		"client {\"b\":1}"
	s := conformance.NewScannerLimit(strings.NewReader(in), 16)
	var got []string
	for {
		l, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		switch {
		case errors.Is(err, conformance.ErrLineTooLong):
			got = append(got, "too long")
		case err != nil:
			t.Fatal(err)
		default:
			got = append(got, l.String())
		}
	}
	want := []string{`agent {"a":"xx"}`, "too long", "too long", `client {"b":1}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestScannerReadsMultiMebibyteLines(t *testing.T) {
	if conformance.MaxLineBytes != 64<<20 {
		t.Fatalf("MaxLineBytes = %d, want 64 MiB", conformance.MaxLineBytes)
	}
	big := `agent {"a":"` + strings.Repeat("x", 4<<20) + `"}`
	lines, errs := conformance.ReadTranscript(strings.NewReader(big + "\nclient {}\n"))
	if len(errs) != 0 || len(lines) != 2 || len(lines[0].Raw) != len(big)-len("agent ") {
		t.Fatalf("lines=%d errs=%v", len(lines), errs)
	}
}

type errAfter struct {
	data string
	err  error
	done bool
}

func (e *errAfter) Read(p []byte) (int, error) {
	if e.done {
		return 0, e.err
	}
	e.done = true
	return copy(p, e.data), nil
}

func TestScannerReaderErrorsAreStickyAndNotLineErrors(t *testing.T) {
	boom := errors.New("boom")
	s := conformance.NewScanner(&errAfter{data: "client {}\nagent {\"partial\":", err: boom})
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		_, err := s.Next()
		var le *conformance.LineError
		if !errors.Is(err, boom) || errors.As(err, &le) {
			t.Fatalf("call %d: err = %v, want the reader's error", i, err)
		}
	}
	lines, errs := conformance.ReadTranscript(&errAfter{data: "client {}\n", err: boom})
	if len(lines) != 1 || len(errs) != 1 || !errors.Is(errs[0], boom) {
		t.Errorf("ReadTranscript = %v, %v", lines, errs)
	}
}

func TestDirectionString(t *testing.T) {
	for d, want := range map[conformance.Direction]string{
		conformance.FromClient: "client", conformance.FromAgent: "agent", 0: "Direction(0)",
	} {
		if got := d.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(d), got, want)
		}
	}
}
