package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeServer answers the recorder's requests in turn, over pipes, with
// the lines script gives for each request it reads (by method, then
// "method#1" for the second one, and so on); "$ID" in a line is replaced
// by the request's id. A request the script has no lines for makes it
// exit. Everything the recorder sent is
// returned by the function it gives back, once the session is done.
func fakeServer(t *testing.T, script map[string][]string) (*session, func() []string) {
	t.Helper()
	toServer, fromClient := io.Pipe()
	fromServer, toClient := io.Pipe()
	// Reading apart from answering: the pipes are synchronous, and the
	// recorder answers a server request while the server is still writing.
	reqs := make(chan []byte, 64)
	sentc := make(chan []string, 1)
	go func() {
		var got []string
		defer func() { close(reqs); sentc <- got }()
		sc := bufio.NewScanner(toServer)
		for sc.Scan() {
			got = append(got, sc.Text())
			reqs <- bytes.Clone(sc.Bytes())
		}
	}()
	go func() {
		defer toClient.Close()
		pages := map[string]int{}
		for line := range reqs {
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &req) != nil || req.ID == nil || req.Method == "" {
				continue
			}
			key := req.Method
			if n := pages[req.Method]; n > 0 {
				key = req.Method + "#" + string(rune('0'+n))
			}
			pages[req.Method]++
			lines, ok := script[key]
			if !ok {
				return // no answer: the server exits
			}
			for _, l := range lines {
				if _, err := io.WriteString(toClient, strings.ReplaceAll(l, "$ID", string(req.ID))+"\n"); err != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() { fromClient.Close(); fromServer.Close() })
	return newSession(fromClient, fromServer), func() []string {
		fromClient.Close()
		return <-sentc
	}
}

const initOK = `{"jsonrpc":"2.0","id":$ID,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}}`

func TestSession_ListTools(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  map[string][]string
		want    string
		wantErr string
		// wantSent are lines the recorder must have sent, beyond the
		// initialize, initialized and list requests.
		wantSent []string
	}{
		{
			name: "one page, bytes as sent",
			script: map[string][]string{
				"initialize": {initOK},
				"tools/list": {`{"jsonrpc":"2.0","id":$ID,"result":{"tools":[ {"name":"b", "inputSchema":{"type":"object","properties":{}}},{"name":"a"} ]}}`},
			},
			want: `[ {"name":"b", "inputSchema":{"type":"object","properties":{}}},{"name":"a"} ]`,
		},
		{
			name: "pages joined",
			script: map[string][]string{
				"initialize":   {initOK},
				"tools/list":   {`{"jsonrpc":"2.0","id":$ID,"result":{"tools":[{"name":"a"}],"nextCursor":"p2"}}`},
				"tools/list#1": {`{"jsonrpc":"2.0","id":$ID,"result":{"tools":[{"name":"b"}]}}`},
			},
			want:     `[{"name":"a"},{"name":"b"}]`,
			wantSent: []string{`{"id":3,"jsonrpc":"2.0","method":"tools/list","params":{"cursor":"p2"}}`},
		},
		{
			name: "banners, notifications and server requests on the way",
			script: map[string][]string{
				"initialize": {"Server running on stdio", "", `{"level":30,"msg":"start"}`, `{"id":1,"result":{}}`, initOK},
				"tools/list": {
					`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}`,
					`{"jsonrpc":"2.0","id":"r1","method":"roots/list"}`,
					`{"jsonrpc":"2.0","id":$ID,"result":{"tools":[{"name":"a"}]}}`,
				},
			},
			want:     `[{"name":"a"}]`,
			wantSent: []string{`{"error":{"code":-32601,"message":"the recorder answers no requests"},"id":"r1","jsonrpc":"2.0"}`},
		},
		{
			name:    "error answer",
			script:  map[string][]string{"initialize": {`{"jsonrpc":"2.0","id":$ID,"error":{"code":-32603,"message":"no token"}}`}},
			wantErr: "initialize: error -32603: no token",
		},
		{
			name:    "answer to another request",
			script:  map[string][]string{"initialize": {`{"jsonrpc":"2.0","id":7,"result":{}}`}},
			wantErr: "initialize: answer for id 7, want 1",
		},
		{
			name:    "no result",
			script:  map[string][]string{"initialize": {`{"jsonrpc":"2.0","id":$ID}`}},
			wantErr: "initialize: answer without a result",
		},
		{
			name:    "no id",
			script:  map[string][]string{"initialize": {`{"jsonrpc":"2.0","result":{}}`}},
			wantErr: "initialize: answer without an id",
		},
		{
			name:    "null result",
			script:  map[string][]string{"initialize": {`{"jsonrpc":"2.0","id":$ID,"result":null}`}},
			wantErr: "initialize: answer without a result",
		},
		{
			name:    "no tools array",
			script:  map[string][]string{"initialize": {initOK}, "tools/list": {`{"jsonrpc":"2.0","id":$ID,"result":{"tools":{}}}`}},
			wantErr: "tools/list result has no tools array",
		},
		{
			name:    "server exits",
			script:  map[string][]string{"initialize": {initOK}},
			wantErr: "waiting for the answer to tools/list: EOF",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, sent := fakeServer(t, tc.script)
			got, err := s.listTools(context.Background())
			lines := sent()
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, string(got)); d != "" {
				t.Errorf("tools (-want +got)\n%s", d)
			}
			for _, w := range tc.wantSent {
				if !contains(lines, w) {
					t.Errorf("the recorder did not send %s; it sent:\n%s", w, strings.Join(lines, "\n"))
				}
			}
			if !strings.Contains(lines[0], `"method":"initialize"`) || !strings.Contains(lines[0], `"protocolVersion":"2025-11-25"`) || lines[1] != `{"jsonrpc":"2.0","method":"notifications/initialized"}` {
				t.Errorf("handshake:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

func TestSession_LongLine(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("a", maxLine) + `"}}` + "\n"
	s := newSession(io.Discard, strings.NewReader(long))
	_, err := s.listTools(context.Background())
	if err == nil || !strings.Contains(err.Error(), "a line longer than") {
		t.Fatalf("err = %v, want a refusal of the long line", err)
	}
}

func FuzzSession(f *testing.F) {
	f.Add([]byte(strings.ReplaceAll(initOK, "$ID", "1") + "\n" + `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a"}]}}` + "\n"))
	f.Add([]byte(strings.ReplaceAll(initOK, "$ID", "1") + "\n" + `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a"}],"nextCursor":"x"}}` + "\n" + `{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}` + "\n"))
	f.Add([]byte("junk\n{\"id\":1}\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		s := newSession(io.Discard, bytes.NewReader(out))
		tools, err := s.listTools(context.Background())
		if err != nil {
			return
		}
		var els []json.RawMessage
		if err := json.Unmarshal(tools, &els); err != nil {
			t.Fatalf("listTools returned %q, not an array: %v", tools, err)
		}
	})
}

func TestPick(t *testing.T) {
	table := []server{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	got, err := pick(table, "c,a")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]server{{Name: "c"}, {Name: "a"}}, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if got, _ := pick(table, ""); len(got) != 3 {
		t.Errorf("pick of none = %v, want all", got)
	}
	if _, err := pick(table, "a,z"); err == nil || err.Error() != `-only: no server "z" in the table` {
		t.Errorf("err = %v", err)
	}
}

func TestBinPath(t *testing.T) {
	dir := t.TempDir()
	for pkg, manifest := range map[string]string{
		"@scope/one":  `{"bin":"dist/index.js"}`,
		"many":        `{"bin":{"x":"a.js","y":"b.js"}}`,
		"named-map":   `{"bin":{"named-server":"a.js"}}`,
		"@scope/none": `{}`,
	} {
		p := filepath.Join(dir, "node_modules", pkg, "package.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "node_modules", ".bin")
	for _, tc := range []struct {
		name    string
		s       server
		want    string
		wantErr string
	}{
		{"string bin is the package's last name", server{Package: "@scope/one"}, filepath.Join(bin, "one"), ""},
		{"one named bin", server{Package: "named-map"}, filepath.Join(bin, "named-server"), ""},
		{"table names it", server{Package: "many", Bin: "y"}, filepath.Join(bin, "y"), ""},
		{"ambiguous", server{Package: "many"}, "", "many declares 2 programs: name one in the table"},
		{"none", server{Package: "@scope/none"}, "", "@scope/none declares 0 programs: name one in the table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := binPath(dir, tc.s)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("binPath = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestScrubPaths(t *testing.T) {
	dir := "/tmp/toolsearch-record-123"
	home := dir + "/home"
	in := `[{"name":"a","description":"Saves under ` + home + `/images; installed in ` + dir + `/node_modules"}]`
	want := `[{"name":"a","description":"Saves under /home/user/images; installed in /opt/mcp-server/node_modules"}]`
	if got := string(scrubPaths([]byte(in), dir, home)); got != want {
		t.Errorf("scrubPaths:\n got %s\nwant %s", got, want)
	}
}

func TestWriteSources(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"github.json":       `[{"name":"a"},{"name":"b"}]`,
		"gen-payroll.json":  `[{"name":"run_payroll"}]`,
		"not-in-table.json": `[{"name":"x"}]`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeSources(dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "SOURCES.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| github | recorded | `@modelcontextprotocol/server-github` | 2025.4.8 | 2 |\n",
		"| gen-payroll | generated | – | – | 1 |\n",
		"| **all** | | | | **3** |\n",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("SOURCES.md lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "No server is generated") || strings.Contains(string(got), "not-in-table") {
		t.Errorf("SOURCES.md:\n%s", got)
	}
	// A file that is not a tools array is an error, not a row.
	if err := os.WriteFile(filepath.Join(dir, "gen-bad.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSources(dir); err == nil || !strings.Contains(err.Error(), "gen-bad.json") {
		t.Errorf("writeSources with a bad file: err = %v", err)
	}
}
