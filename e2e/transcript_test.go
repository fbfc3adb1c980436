package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/transcripts")

// upExchange is one POST that mcpgw sent an upstream, and its answer.
type upExchange struct {
	method  string // the JSON-RPC method of the request
	reqHead http.Header
	req     []byte
	status  int
	resHead http.Header
	res     []json.RawMessage
}

// upRecorder is a reverse proxy between mcpgw and an upstream's HTTP
// endpoint that records each POST of one JSON-RPC message and its whole
// answer. Streams that stay open (GET, subscriptions/listen) pass
// through unrecorded: what comes on them depends on timing, not on the
// requests the transcripts follow.
type upRecorder struct {
	target *url.URL
	pass   *httputil.ReverseProxy
	mu     sync.Mutex
	log    []upExchange
}

// startRecorder runs a upRecorder for upstream on 127.0.0.1:0 and returns
// it and its URL.
func startRecorder(t *testing.T, upstream string) (*upRecorder, string) {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rec := &upRecorder{target: target}
	rec.pass = &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.Out.URL = target; pr.Out.Host = target.Host },
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rec}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return rec, "http://" + ln.Addr().String() + "/mcp"
}

func (rec *upRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	var m struct {
		Method string `json:"method"`
	}
	json.Unmarshal(body, &m)
	if r.Method != http.MethodPost || m.Method == "subscriptions/listen" {
		rec.pass.ServeHTTP(w, r)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), http.MethodPost, rec.target.String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	ex := upExchange{method: m.Method, reqHead: r.Header.Clone(), req: body, status: resp.StatusCode, resHead: resp.Header.Clone()}
	if ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";"); ct == "text/event-stream" {
		ex.res = sseData(data)
	} else if len(bytes.TrimSpace(data)) > 0 {
		ex.res = []json.RawMessage{data}
	}
	rec.mu.Lock()
	rec.log = append(rec.log, ex)
	rec.mu.Unlock()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(data)
}

// since returns the exchanges recorded from the n-th on.
func (rec *upRecorder) since(n int) []upExchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.log[n:])
}

func (rec *upRecorder) len() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.log)
}

// transcriptStep is one client message of a transcript's fixed sequence.
type transcriptStep struct {
	method string
	params map[string]any // nil for none
}

// transcriptSteps is the fixed sequence of each cell, after the client's
// handshake: list tools, call a tool, get a prompt, read a resource. The
// call's _meta has a key of the application's, which is relayed, and a
// reserved key, which is the client's hop's own and never relayed.
func transcriptSteps() []transcriptStep {
	return []transcriptStep{
		{"tools/list", nil},
		{"tools/call", map[string]any{"name": "mcp__up__echo", "arguments": map[string]any{"text": "hi"},
			"_meta": map[string]any{"example.com/trace": "keep-me", "io.modelcontextprotocol/clientInfo": map[string]any{"name": "e2e-spoof", "version": "6.6.6"}}}},
		{"prompts/get", map[string]any{"name": "mcp__up__greeting", "arguments": map[string]any{"name": "Ada"}}},
		{"resources/read", map[string]any{"uri": "note://hello"}},
	}
}

// The reserved _meta keys of a 2026-07-28 request.
const (
	metaVersion = "io.modelcontextprotocol/protocolVersion"
	metaCaps    = "io.modelcontextprotocol/clientCapabilities"
	metaInfo    = "io.modelcontextprotocol/clientInfo"
)

// clientMessage is one message a transcript's client sends, and the
// headers it sends it with.
type clientMessage struct {
	header http.Header
	body   []byte
}

// modernMessage builds a 2026-07-28 request: the client's reserved _meta
// keys beside whatever params._meta had, and headers mirroring the body.
func modernMessage(id int, step transcriptStep) clientMessage {
	params := map[string]any{}
	meta := map[string]any{}
	for k, v := range step.params {
		params[k] = v
	}
	if m, ok := params["_meta"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	meta[metaVersion] = modernVersion
	meta[metaCaps] = map[string]any{}
	meta[metaInfo] = map[string]any{"name": "e2e-raw", "version": "1"}
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": step.method, "params": params})
	h := http.Header{}
	h.Set("MCP-Protocol-Version", modernVersion)
	h.Set("Mcp-Method", step.method)
	switch step.method {
	case "tools/call", "prompts/get":
		h.Set("Mcp-Name", fmt.Sprint(params["name"]))
	case "resources/read":
		h.Set("Mcp-Name", fmt.Sprint(params["uri"]))
	}
	return clientMessage{header: h, body: body}
}

// legacyMessage builds a 2025-11-25 message of session sid ("" before
// initialize); id 0 makes a notification.
func legacyMessage(id int, sid string, step transcriptStep) clientMessage {
	msg := map[string]any{"jsonrpc": "2.0", "method": step.method}
	if id != 0 {
		msg["id"] = id
	}
	if step.params != nil {
		msg["params"] = step.params
	}
	body, _ := json.Marshal(msg)
	h := http.Header{}
	if sid != "" {
		h.Set("Mcp-Session-Id", sid)
		h.Set("MCP-Protocol-Version", legacyVersion)
	}
	return clientMessage{header: h, body: body}
}

// transcript builds one cell's txtar file.
type transcript struct {
	t       *testing.T
	buf     bytes.Buffer
	replace []string // old, new pairs applied to every text written
	// sessions counts the upstream session ids given a placeholder.
	sessions int
}

func (tr *transcript) section(name string) { fmt.Fprintf(&tr.buf, "-- %s --\n", name) }

// headers writes h's members named in names, or every Mcp-* member when
// names is nil, one per line, sorted.
func (tr *transcript) headers(h http.Header, names []string) {
	var lines []string
	for k, v := range h {
		if names == nil && !strings.HasPrefix(k, "Mcp-") || names != nil && !slices.Contains(names, k) {
			continue
		}
		lines = append(lines, k+": "+tr.normalize(strings.Join(v, ", ")))
	}
	slices.Sort(lines)
	for _, l := range lines {
		tr.buf.WriteString(l + "\n")
	}
}

func (tr *transcript) normalize(s string) string {
	return strings.NewReplacer(tr.replace...).Replace(s)
}

// json writes msg with sorted keys and indented, its id replaced by
// id when id is not empty.
func (tr *transcript) json(msg []byte, id string) {
	d := json.NewDecoder(bytes.NewReader(msg))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		tr.t.Fatalf("not JSON: %v: %s", err, msg)
	}
	if m, ok := v.(map[string]any); ok && id != "" {
		if _, ok := m["id"]; ok {
			m["id"] = id
		}
	}
	maskVersion(v)
	var out bytes.Buffer
	e := json.NewEncoder(&out)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(v); err != nil {
		tr.t.Fatal(err)
	}
	tr.buf.WriteString(tr.normalize(out.String()))
}

// maskVersion replaces, anywhere in v, the version of an Implementation
// named mcpgw (its serverInfo and clientInfo), which is the build's.
func maskVersion(v any) {
	switch v := v.(type) {
	case map[string]any:
		if v["name"] == "mcpgw" && v["version"] != nil {
			v["version"] = "<mcpgw-version>"
		}
		for _, e := range v {
			maskVersion(e)
		}
	case []any:
		for _, e := range v {
			maskVersion(e)
		}
	}
}

// upstreamSide writes what the upstream received and answered in exs.
// The ids mcpgw gives its own requests are numbered per connection, so
// they depend on how many requests came before: each becomes <id> once
// the answer's id is checked against it.
func (tr *transcript) upstreamSide(prefix string, exs []upExchange) {
	// Each upstream session id a server issues gets a placeholder of its
	// own, in the order they appear: mcpgw may hold more than one (a
	// session that mirrors a client's capabilities).
	for _, ex := range exs {
		for _, sid := range []string{ex.resHead.Get("Mcp-Session-Id"), ex.reqHead.Get("Mcp-Session-Id")} {
			if sid != "" && !slices.Contains(tr.replace, sid) {
				tr.sessions++
				name := "<upstream-session>"
				if tr.sessions > 1 {
					name = fmt.Sprintf("<upstream-session-%d>", tr.sessions)
				}
				tr.replace = append(tr.replace, sid, name)
			}
		}
	}
	tr.section(prefix + "upstream-receives")
	if len(exs) == 0 {
		tr.buf.WriteString("(nothing: mcpgw answers this itself)\n")
	}
	for i, ex := range exs {
		if i > 0 {
			tr.buf.WriteString("\n")
		}
		tr.headers(ex.reqHead, nil)
		tr.json(ex.req, "<id>")
	}
	tr.section(prefix + "upstream-answers")
	if len(exs) == 0 {
		tr.buf.WriteString("(nothing)\n")
	}
	for i, ex := range exs {
		if i > 0 {
			tr.buf.WriteString("\n")
		}
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(ex.req, &req)
		fmt.Fprintf(&tr.buf, "HTTP %d\n", ex.status)
		tr.headers(ex.resHead, []string{"Mcp-Session-Id"})
		for _, m := range ex.res {
			var res struct {
				ID json.RawMessage `json:"id"`
			}
			json.Unmarshal(m, &res)
			if res.ID != nil && !bytes.Equal(res.ID, req.ID) {
				tr.t.Errorf("the upstream answered id %s to a request with id %s", res.ID, req.ID)
			}
			tr.json(m, "<id>")
		}
	}
}

// TestTranscripts runs one fixed sequence (handshake, tools/list,
// tools/call, prompts/get, resources/read) through mcpgw in each of the
// four cells of the bridge between the eras (client era → upstream era),
// records what the client sent and got and what the upstream received and
// answered (through a recording proxy in front of the upstream), and
// compares it with testdata/transcripts/<cell>.txtar; -update rewrites
// those. Whatever the goldens hold, it checks the rules of the bridge: no
// reserved _meta key of the client reaches the upstream, modern upstreams
// get mcpgw's own, and resultType, ttlMs and cacheScope reach modern
// clients only.
func TestTranscripts(t *testing.T) {
	eraBins(t)
	for _, up := range []struct {
		era    string
		legacy bool
	}{{"modern", false}, {"legacy", true}} {
		rec, recURL := startRecorder(t, startEraHTTP(t, "up", up.legacy, ""))
		g := startGateway(t, baseEnv(), fmt.Sprintf("servers:\n  - name: up\n    transport: http\n    url: %s\n    protocol: auto\n", recURL))
		g.waitState(t, "up", "running")
		handshake := rec.since(0)
		for _, client := range []string{"modern", "legacy"} {
			t.Run(client+"-"+up.era, func(t *testing.T) {
				tr := &transcript{t: t, replace: []string{recURL, "<upstream-url>", g.URL, "<gateway-url>"}}
				fmt.Fprintf(&tr.buf, "A %s client through mcpgw to a %s upstream (eraserver over HTTP).\n", client, up.era)
				tr.buf.WriteString("Each step: what the client sends, what the upstream receives and answers,\nwhat the client gets. Written by go test ./e2e -run TestTranscripts -update.\n")
				var hs []upExchange
				for _, ex := range handshake {
					if ex.method == "server/discover" || ex.method == "initialize" || ex.method == "notifications/initialized" {
						hs = append(hs, ex)
					}
				}
				tr.upstreamSide("0 mcpgw starts/", hs)
				runCell(t, tr, g.URL+"/mcp", client == "modern", rec)
				checkGolden(t, client+"-"+up.era, tr.buf.Bytes())
			})
		}
	}
}

// runCell sends the client's handshake and transcriptSteps, writing each
// step's four sections, and checks the bridge's rules on what passed.
func runCell(t *testing.T, tr *transcript, url string, modern bool, rec *upRecorder) {
	steps := []transcriptStep{{method: "server/discover"}}
	if !modern {
		steps = []transcriptStep{
			{"initialize", map[string]any{"protocolVersion": legacyVersion, "capabilities": map[string]any{},
				"clientInfo": map[string]any{"name": "e2e-raw", "version": "1"}}},
			{"notifications/initialized", nil},
		}
	}
	steps = append(steps, transcriptSteps()...)
	sid := ""
	id := 0
	for i, step := range steps {
		prefix := fmt.Sprintf("%d %s/", i+1, step.method)
		var msg clientMessage
		if modern {
			id++
			msg = modernMessage(id, step)
		} else {
			msgID := 0
			if !strings.HasPrefix(step.method, "notifications/") {
				id++
				msgID = id
			}
			msg = legacyMessage(msgID, sid, step)
		}
		mark := rec.len()
		a := postRaw(t, url, msg.header, string(msg.body))
		exs := rec.since(mark)
		if s := a.header.Get("Mcp-Session-Id"); s != "" && sid == "" {
			sid = s
			tr.replace = append(tr.replace, sid, "<session>")
		}

		tr.section(prefix + "client-sends")
		tr.headers(msg.header, nil)
		tr.json(msg.body, "")
		tr.upstreamSide(prefix, exs)
		tr.section(prefix + "client-gets")
		fmt.Fprintf(&tr.buf, "HTTP %d\n", a.status)
		tr.headers(a.header, []string{"Mcp-Session-Id"})
		for _, m := range a.msgs {
			tr.json(m, "")
		}

		checkBridge(t, step.method, modern, exs, a)
	}
}

// checkBridge checks one step against the rules of the bridge between
// the eras, whatever the golden transcripts say.
func checkBridge(t *testing.T, method string, modern bool, exs []upExchange, a rawAnswer) {
	t.Helper()
	if a.status != http.StatusOK && a.status != http.StatusAccepted {
		t.Errorf("%s: HTTP %d: %s", method, a.status, a.body)
	}
	for _, ex := range exs {
		var m struct {
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if err := json.Unmarshal(ex.req, &m); err != nil {
			t.Errorf("%s: the upstream got a message that is not JSON-RPC: %s", method, ex.req)
			continue
		}
		modernUp := ex.reqHead.Get("Mcp-Protocol-Version") == modernVersion || ex.method == "server/discover"
		// In every cell, the client's reserved _meta keys stay with it.
		if bytes.Contains(ex.req, []byte("e2e-spoof")) || bytes.Contains(ex.req, []byte("e2e-raw")) {
			t.Errorf("%s: the client's own reserved _meta reached the upstream: %s", method, ex.req)
		}
		if ex.method == "tools/call" && string(m.Params.Meta["example.com/trace"]) != `"keep-me"` {
			t.Errorf("%s: the client's own _meta key example.com/trace did not reach the upstream: %s", method, ex.req)
		}
		if !modernUp {
			continue
		}
		if string(m.Params.Meta[metaVersion]) != `"`+modernVersion+`"` || !bytes.Contains(m.Params.Meta[metaInfo], []byte(`"mcpgw"`)) || m.Params.Meta[metaCaps] == nil {
			t.Errorf("%s: a modern upstream got a request without mcpgw's own _meta: %s", method, ex.req)
		}
		if ex.reqHead.Get("Mcp-Method") != ex.method {
			t.Errorf("%s: a modern upstream got Mcp-Method %q for %s", method, ex.reqHead.Get("Mcp-Method"), ex.method)
		}
	}
	for _, msg := range a.msgs {
		var r struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		json.Unmarshal(msg, &r)
		if r.Result == nil {
			continue
		}
		_, typ := r.Result["resultType"]
		_, ttl := r.Result["ttlMs"]
		_, scope := r.Result["cacheScope"]
		cacheable := method == "server/discover" || method == "tools/list" || method == "resources/read"
		switch {
		case modern && !typ:
			t.Errorf("%s: a modern client got a result without resultType: %s", method, msg)
		case modern && cacheable && (!ttl || !scope):
			t.Errorf("%s: a modern client got a cacheable result without ttlMs and cacheScope: %s", method, msg)
		case !modern && typ:
			t.Errorf("%s: a legacy client got a result with resultType: %s", method, msg)
		case modern && method == "tools/list" && bytes.Contains(msg, []byte(`"taskSupport"`)):
			t.Errorf("%s: a modern client got execution.taskSupport, which 2026-07-28 removed: %s", method, msg)
		case !modern && (ttl || scope):
			t.Errorf("%s: a legacy client got a result with ttlMs or cacheScope (its server's own are left out too): %s", method, msg)
		}
	}
}

// checkGolden compares got with testdata/transcripts/<name>.txtar, or
// writes it there with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "transcripts", name+".txtar")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./e2e -run TestTranscripts -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("transcript %s differs (-want +got); if the change is meant, rerun with -update:\n%s", path, diff)
	}
}
