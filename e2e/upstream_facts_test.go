package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestEverythingServer_LegacyInputRequests pins what the Go SDK's
// everything-server (stateful, so 2025-11-25 only) sends a client of the
// session era for its multi-round-trip tools. Two 2026-07-28 conformance
// scenarios fail through mcpgw in front of it because of this, and are
// listed in conformance/expected-failures.yaml:
//
//   - The SDK turns the tool's input requests into elicitation/create
//     requests that carry no key: the key the scenario expects
//     ("user_name") never leaves the server, so mcpgw names the parked
//     request its own way (input-required-result-basic-elicitation).
//   - The SDK fulfils one round for such a client and then returns the
//     tool's next round as a plain result: empty content with
//     inputRequests and requestState beside it and no resultType, which
//     no 2025 client reads as a request for input
//     (input-required-result-multi-round).
//
// If the SDK changes either, this test fails: look again at the list.
func TestEverythingServer_LegacyInputRequests(t *testing.T) {
	modernBins(t)
	url := startEverythingHTTP(t, false)
	session := rawInitialize(t, url)

	// The first round: the server asks with a request of its own.
	calls := make(chan json.RawMessage, 4)
	go rawStream(t, url, session, `{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"test_input_required_result_multi_round","arguments":{}}}`, calls)
	ask := <-calls
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params map[string]any  `json:"params"`
	}
	if err := json.Unmarshal(ask, &req); err != nil || req.Method != "elicitation/create" {
		t.Fatalf("the server's first message %s, want elicitation/create", ask)
	}
	if strings.Contains(string(ask), "step1") || strings.Contains(string(ask), "user_name") {
		t.Errorf("the elicitation/create carries the tool's input key: %s", ask)
	}
	answer := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"action":"accept","content":{"name":"Alice"}}}`
	if a := postRaw(t, url, sessionHeader(session), answer); a.status != http.StatusAccepted {
		t.Fatalf("answering the elicitation: %d %s", a.status, a.body)
	}

	// The second round comes back as the call's result.
	res := <-calls
	var result struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(res, &result); err != nil || result.Result == nil {
		t.Fatalf("the call's answer %s, want a result", res)
	}
	if _, ok := result.Result["resultType"]; ok {
		t.Errorf("the result has a resultType: %s", res)
	}
	if _, ok := result.Result["inputRequests"]; !ok {
		t.Errorf("the result has no inputRequests: %s", res)
	}
	if c := string(result.Result["content"]); c != "[]" {
		t.Errorf("the result's content %s, want []", c)
	}
}

// rawInitialize opens a 2025-11-25 session that declares every kind of
// input, and returns its id.
func rawInitialize(t *testing.T, url string) string {
	t.Helper()
	a := postRaw(t, url, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{},"sampling":{},"roots":{}},"clientInfo":{"name":"e2e","version":"1"}}}`)
	session := a.header.Get("Mcp-Session-Id")
	if a.status != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %s", a.status, a.body)
	}
	if a := postRaw(t, url, sessionHeader(session), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); a.status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d %s", a.status, a.body)
	}
	return session
}

func sessionHeader(session string) http.Header {
	return http.Header{"Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {"2025-11-25"}}
}

// rawStream POSTs body and sends each message of the answer's event
// stream to out as it comes.
func rawStream(t *testing.T, url, session, body string, out chan<- json.RawMessage) {
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return
	}
	req.Header = sessionHeader(session)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			out <- json.RawMessage(strings.TrimSpace(data))
		}
	}
}
