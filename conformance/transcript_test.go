package conformance_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.Empty(t, errs, "errors")
	want := []conformance.Line{
		{N: 3, Dir: conformance.FromClient, Raw: []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`)},
		{N: 5, Dir: conformance.FromAgent, Raw: []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)},
		{N: 6, Dir: conformance.FromClient, Raw: []byte(`{ "a" : [1, 2] }`)},
		{N: 8, Dir: conformance.FromAgent, Raw: []byte(`{"last":"no newline"}`)},
	}
	require.Len(t, lines, len(want), "lines read")
	for i, w := range want {
		g := lines[i]
		assert.Equal(t, w, g, "line %d", i)

	}
	assert.Equal(t, `agent {"jsonrpc":"2.0","id":1,"result":{}}`, lines[1].String(), "String()")
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
	require.Len(t, errs, len(wantErrLines), "errors")
	for i, err := range errs {
		var le *conformance.LineError
		if !assert.ErrorAs(t, err, &le, "error %d", i) {
			continue
		}
		if !assert.Equal(t, wantErrLines[i], le.N, "error %d", i) {
			continue
		}
		assert.True(t, strings.HasPrefix(err.Error(), "line "), "error text %q does not name the line", err)
	}
	if assert.Len(t, lines, 3, "lines") {
		if assert.Equal(t, 1, lines[0].N, "lines") {
			if assert.Equal(t, 10, lines[1].N, "lines") {
				assert.Equal(t, 11, lines[2].N, "lines")
			}
		}
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
			require.Fail(t, fmt.Sprintf("%v", err))
		default:
			got = append(got, l.String())
		}
	}
	want := []string{`agent {"a":"xx"}`, "too long", "too long", `client {"b":1}`}
	assert.Equal(t, strings.Join(want, "|"), strings.Join(got, "|"), "strings.Join")
}

func TestScannerReadsMultiMebibyteLines(t *testing.T) {
	require.Equal(t, 64<<20, conformance.MaxLineBytes, "MaxLineBytes")
	big := `agent {"a":"` + strings.Repeat("x", 4<<20) + `"}`
	lines, errs := conformance.ReadTranscript(strings.NewReader(big + "\nclient {}\n"))
	require.Empty(t, errs, "lines=%d errs", len(lines))
	require.Len(t, lines, 2, "lines=%d errs", len(lines))
	require.Len(t, lines[0].Raw, len(big)-len("agent "), "lines=%d errs", len(lines))
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
	_, err := s.Next()
	require.NoError(t, err, "Next")
	for i := 0; i < 2; i++ {
		_, err := s.Next()
		var le *conformance.LineError
		require.ErrorIs(t, err, boom, "call %d: err", i)
		require.False(t, errors.As(err, &le), "call %d: err = %v, want the reader's error", i, err)
	}
	lines, errs := conformance.ReadTranscript(&errAfter{data: "client {}\n", err: boom})
	if assert.Len(t, lines, 1, "ReadTranscript, %v", errs) {
		if assert.Len(t, errs, 1, "ReadTranscript, %v", errs) {
			assert.ErrorIs(t, errs[0], boom, "ReadTranscript, %v", errs)
		}
	}
}

// Each hands over messages and unreadable lines in transcript order, ends
// with nil at the end of the input, and with the reader's error (after
// what was read before it) when the reader fails.
func TestScannerEachKeepsTranscriptOrderAndReturnsTheReadersError(t *testing.T) {
	var got []string
	each := func(s *conformance.Scanner) error {
		return s.Each(
			func(l conformance.Line) { got = append(got, fmt.Sprintf("%d %s", l.N, l.Dir)) },
			func(le *conformance.LineError) { got = append(got, fmt.Sprintf("%d bad", le.N)) })
	}
	require.NoError(t, each(conformance.NewScanner(strings.NewReader("client {}\nnonsense\n# note\nagent {}\nagent [1]\n"))))
	assert.Equal(t, []string{"1 client", "2 bad", "4 agent", "5 bad"}, got)

	got = nil
	boom := errors.New("boom")
	require.ErrorIs(t, each(conformance.NewScanner(&errAfter{data: "client {}\n", err: boom})), boom)
	assert.Equal(t, []string{"1 client"}, got, "what was read before the reader failed")
}

func TestDirectionString(t *testing.T) {
	for d, want := range map[conformance.Direction]string{
		conformance.FromClient: "client", conformance.FromAgent: "agent", 0: "Direction(0)",
	} {
		assert.Equal(t, want, d.String(), "%d.String()", int(d))
	}
}
