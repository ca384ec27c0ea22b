package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAuditPrintsWhatASummaryLost(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"audit", "../../test/peers/testdata/claude-acp-0.101.0/compact-cap.jsonl"}, nil, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	assert.Contains(t, out.String(), "compaction 336610cf-a34a-454e-b2d8-fd180e2d9e7e: 1 loss (3 history items)")
	assert.Contains(t, out.String(), "url  https://code.claude.com/docs/en/auto-mode-classifier-billing  (line 13, agent)")
}

func TestAuditJSONIsOneObjectPerCompaction(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"audit", "--json", "../../audit/testdata/constructed/two-compactions.jsonl"}, nil, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	sc := bufio.NewScanner(&out)
	var reports []map[string]any
	for sc.Scan() {
		var r map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		reports = append(reports, r)
	}
	require.Len(t, reports, 2)
	assert.Equal(t, "cmp_1", reports[0]["compactionId"])
	assert.Equal(t, []any{}, reports[0]["knownLoss"], "nothing lost is an empty array, not null")
	loss, ok := reports[1]["knownLoss"].([]any)
	require.True(t, ok)
	require.NotEmpty(t, loss)
	first := loss[0].(map[string]any)
	assert.Equal(t, "url", first["kind"])
	assert.Equal(t, "https://example.com/acp/rfd-compaction", first["value"])
}

func TestAuditReadsStdinAndSkipsMalformedLines(t *testing.T) {
	in := strings.NewReader("nonsense\n" +
		`client {"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"fix cmd/x/main.go"}]}}` + "\n" +
		`agent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"}}}}` + "\n" +
		`agent {"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}` + "\n" +
		`client {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"/compact"}]}}` + "\n" +
		`agent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"fixed something"}]}}}` + "\n")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"audit", "-"}, in, &out, &errb)
	require.Equal(t, 0, code)
	assert.Contains(t, errb.String(), "<stdin>:1: skipped")
	assert.Contains(t, out.String(), "<stdin>:6: session s, compaction c1: 1 loss (2 history items)")
	assert.Contains(t, out.String(), "path  cmd/x/main.go  (line 2, user)")
}

func TestAuditWantsOneFile(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"audit"}, nil, &out, &errb))
	assert.Equal(t, 2, run(context.Background(), []string{"audit", "/nonexistent/x.jsonl"}, nil, &out, &errb))
}
