package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// demoBin is the demo-server binary, built once by TestMain.
var demoBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "demo-server-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	demoBin = filepath.Join(dir, "demo-server")
	// go test puts its own go first on PATH.
	build := exec.Command("go", "build", "-o", demoBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building demo-server: %v\n", err)
		return 1
	}
	return m.Run()
}

// waitLimit bounds every wait on the server so that a broken server fails the
// test instead of hanging it. It is not a speed assertion.
const waitLimit = 30 * time.Second

// testStep is how long one of slow's seconds lasts in the in-process server.
const testStep = 100 * time.Millisecond

// The servers under test see exactly this environment: the env tool must say
// whether each variable is set and never echo a value.
var testEnv = map[string]string{"DEMO_SET": "secret-value", "DEMO_EMPTY": ""}

func testLookupEnv(name string) (string, bool) {
	v, ok := testEnv[name]
	return v, ok
}

// pinnedVersions are the versions each test connects at.
var pinnedVersions = []string{"2025-11-25", "2025-03-26"}

// A peer is a running demo server with a client session connected to it.
type peer struct {
	session *mcp.ClientSession
	stderr  *lines // what the server wrote on stderr
}

// A connectFunc starts a demo server and connects client to it, asking for
// version ("" means the SDK's latest). Everything it starts is stopped by
// t.Cleanup.
type connectFunc func(t *testing.T, client *mcp.Client, version string) *peer

var transports = []struct {
	name    string
	connect connectFunc
}{
	{"stdio", connectStdio},
	{"http", connectHTTP},
}

// connectStdio runs the built binary as a child over stdin/stdout.
func connectStdio(t *testing.T, client *mcp.Client, version string) *peer {
	t.Helper()
	stderr := newLines()
	stderr.logOnFailure(t, "the demo server's stderr")
	cmd := exec.Command(demoBin, "-name", "demo-stdio")
	for k, v := range testEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = stderr
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting over stdio: %v", err)
	}
	t.Cleanup(func() {
		// Close closes stdin and waits for the child; it must exit cleanly.
		if err := cs.Close(); err != nil {
			t.Errorf("closing stdio session: %v", err)
		}
	})
	return &peer{session: cs, stderr: stderr}
}

// connectHTTP serves newServer in-process, through the handler main uses, on
// an httptest server at 127.0.0.1:0.
func connectHTTP(t *testing.T, client *mcp.Client, version string) *peer {
	t.Helper()
	stderr := newLines()
	stderr.logOnFailure(t, "the demo server's stderr")
	srv, err := newServer(options{Name: "demo-http", Stderr: stderr, LookupEnv: testLookupEnv, Step: testStep})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newHTTPHandler(srv))
	t.Cleanup(ts.Close) // runs after the session's Close below
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting over http: %v", err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("closing http session: %v", err)
		}
	})
	return &peer{session: cs, stderr: stderr}
}

// forEachPeer runs f in parallel subtests for every transport and pinned version.
func forEachPeer(t *testing.T, f func(t *testing.T, connect func(*testing.T, *mcp.ClientOptions) *peer)) {
	for _, tr := range transports {
		for _, version := range pinnedVersions {
			t.Run(tr.name+"/"+version, func(t *testing.T) {
				t.Parallel()
				f(t, func(t *testing.T, opts *mcp.ClientOptions) *peer {
					client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "v0"}, opts)
					p := tr.connect(t, client, version)
					if got := p.session.InitializeResult().ProtocolVersion; got != version {
						t.Fatalf("negotiated protocol version %q, want %q", got, version)
					}
					return p
				})
			})
		}
	}
}

func TestServer_ListTools(t *testing.T) {
	type schemas struct{ Input, Output any }
	want := map[string]schemas{
		"echo":     {Input: decode(t, echoInputSchema)},
		"add":      {Input: decode(t, addInputSchema), Output: decode(t, addOutputSchema)},
		"weather":  {Input: decode(t, weatherInputSchema), Output: decode(t, weatherOutputSchema)},
		"image":    {Input: decode(t, emptyInputSchema)},
		"slow":     {Input: decode(t, slowInputSchema)},
		"env":      {Input: decode(t, envInputSchema)},
		"fail":     {Input: decode(t, emptyInputSchema)},
		"picture":  {Input: decode(t, pictureInputSchema)},
		"sound":    {Input: decode(t, emptyInputSchema)},
		"document": {Input: decode(t, emptyInputSchema)},
		"icon":     {Input: decode(t, emptyInputSchema)},
		"mixed":    {Input: decode(t, emptyInputSchema), Output: decode(t, mixedOutputSchema)},
	}
	forEachPeer(t, func(t *testing.T, connect func(*testing.T, *mcp.ClientOptions) *peer) {
		p := connect(t, nil)
		res, err := p.session.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		got := make(map[string]schemas)
		for _, tool := range res.Tools {
			got[tool.Name] = schemas{Input: tool.InputSchema, Output: tool.OutputSchema}
			if tool.Description == "" {
				t.Errorf("tool %q has no description", tool.Name)
			}
			props, _ := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
			for name, prop := range props {
				if d, _ := prop.(map[string]any)["description"].(string); d == "" {
					t.Errorf("tool %q: property %q has no description", tool.Name, name)
				}
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tools/list schemas mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestServer_CallTool(t *testing.T) {
	// The media fixtures built in this process must be what the stdio child
	// sends too: same build, same bytes.
	picture := &mcp.ImageContent{MIMEType: "image/png", Data: fixture(t, picturePNG), Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.5}}
	icon := &mcp.ImageContent{MIMEType: "image/png", Data: fixture(t, iconPNG)}
	tests := []struct {
		name string
		tool string
		args map[string]any
		want *mcp.CallToolResult
	}{
		{
			name: "echo",
			tool: "echo",
			args: map[string]any{"text": "hello, gateway"},
			want: textResult("hello, gateway"),
		},
		{
			name: "add",
			tool: "add",
			args: map[string]any{"a": 2, "b": 0.5},
			want: &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: `{"sum":2.5}`}},
				StructuredContent: map[string]any{"sum": 2.5},
			},
		},
		{
			name: "weather",
			tool: "weather",
			args: map[string]any{"city": "Lisbon"},
			want: &mcp.CallToolResult{
				Content: []mcp.Content{&mcp.TextContent{
					Text: `{"city":"Lisbon","conditions":"sunny","humidity_pct":0,"temperature":{"unit":"celsius","value":26},"wind_kph":55}`,
				}},
				StructuredContent: map[string]any{
					"city":         "Lisbon",
					"conditions":   "sunny",
					"humidity_pct": 0.0,
					"temperature":  map[string]any{"unit": "celsius", "value": 26.0},
					"wind_kph":     55.0,
				},
			},
		},
		{
			name: "env set",
			tool: "env",
			args: map[string]any{"name": "DEMO_SET"},
			want: textResult("set"),
		},
		{
			name: "env set but empty",
			tool: "env",
			args: map[string]any{"name": "DEMO_EMPTY"},
			want: textResult("set"),
		},
		{
			name: "env unset",
			tool: "env",
			args: map[string]any{"name": "DEMO_UNSET"},
			want: textResult("unset"),
		},
		{
			name: "fail",
			tool: "fail",
			want: &mcp.CallToolResult{
				Content: []mcp.Content{&mcp.TextContent{Text: "fail: this tool always fails"}},
				IsError: true,
			},
		},
		{
			name: "slow zero seconds",
			tool: "slow",
			args: map[string]any{"seconds": 0},
			want: textResult("slept 0 seconds"),
		},
		{
			name: "slow without arguments: 5 seconds",
			tool: "slow",
			want: textResult("slept 5 seconds"),
		},
		{
			name: "picture",
			tool: "picture",
			want: &mcp.CallToolResult{Content: []mcp.Content{picture}},
		},
		{
			name: "picture default size",
			tool: "picture",
			args: map[string]any{"size_kib": 200},
			want: &mcp.CallToolResult{Content: []mcp.Content{picture}},
		},
		{
			name: "sound",
			tool: "sound",
			want: &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{
				MIMEType:    "audio/wav",
				Data:        soundWAV(),
				Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.25},
			}}},
		},
		{
			name: "document",
			tool: "document",
			want: &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///demo/report.pdf", MIMEType: "application/pdf", Blob: reportPDF()}},
				&mcp.TextContent{Text: "report attached"},
			}},
		},
		{
			name: "icon",
			tool: "icon",
			want: &mcp.CallToolResult{Content: []mcp.Content{icon}},
		},
		{
			name: "mixed",
			tool: "mixed",
			want: &mcp.CallToolResult{
				Content: []mcp.Content{
					&mcp.TextContent{Text: "before"},
					picture,
					&mcp.ResourceLink{URI: "https://example.com/doc", Name: "doc"},
					icon,
				},
				StructuredContent: map[string]any{"ok": true},
			},
		},
	}
	forEachPeer(t, func(t *testing.T, connect func(*testing.T, *mcp.ClientOptions) *peer) {
		p := connect(t, nil)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := p.session.CallTool(t.Context(), &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
				if err != nil {
					t.Fatalf("tools/call %s: %v", tt.tool, err)
				}
				// bytes.Equal, since cmp compares the media byte by byte, slowly.
				if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreUnexported(mcp.CallToolResult{}), cmp.Comparer(bytes.Equal)); diff != "" {
					t.Errorf("tools/call %s mismatch (-want +got):\n%s", tt.tool, diff)
				}
			})
		}
		t.Run("image", func(t *testing.T) {
			got, err := p.session.CallTool(t.Context(), &mcp.CallToolParams{Name: "image"})
			if err != nil {
				t.Fatalf("tools/call image: %v", err)
			}
			if len(got.Content) != 2 {
				t.Fatalf("got %d content blocks, want 2 (image, text)", len(got.Content))
			}
			img, ok := got.Content[0].(*mcp.ImageContent)
			if !ok {
				t.Fatalf("first block is %T, want *mcp.ImageContent", got.Content[0])
			}
			if img.MIMEType != "image/png" {
				t.Errorf("mimeType = %q, want image/png", img.MIMEType)
			}
			decoded, err := png.Decode(bytes.NewReader(img.Data))
			if err != nil {
				t.Fatalf("decoding image data as PNG: %v", err)
			}
			if b := decoded.Bounds(); b.Dx() != 16 || b.Dy() != 16 {
				t.Errorf("image is %dx%d, want 16x16", b.Dx(), b.Dy())
			}
			want := &mcp.TextContent{Text: fmt.Sprintf("a 16x16 PNG colour gradient, %d bytes", len(img.Data))}
			if diff := cmp.Diff(want, got.Content[1]); diff != "" {
				t.Errorf("text block mismatch (-want +got):\n%s", diff)
			}
		})
	})
}

// TestServer_Media checks that each media tool's blocks are valid files of
// the promised kind and size, and that a second call returns the same bytes.
func TestServer_Media(t *testing.T) {
	tests := []struct {
		name  string
		tool  string
		args  map[string]any
		check func(t *testing.T, res *mcp.CallToolResult)
	}{
		{
			name: "picture",
			tool: "picture",
			check: func(t *testing.T, res *mcp.CallToolResult) {
				checkPNG(t, imageData(t, res, 0), 256, 200, 200*1024, 220*1024)
			},
		},
		{
			name: "picture smallest",
			tool: "picture",
			args: map[string]any{"size_kib": 1},
			check: func(t *testing.T, res *mcp.CallToolResult) {
				checkPNG(t, imageData(t, res, 0), 256, 1, 1024, 1024*11/10)
			},
		},
		{
			name: "sound",
			tool: "sound",
			check: func(t *testing.T, res *mcp.CallToolResult) {
				if len(res.Content) != 1 {
					t.Fatalf("got %d content blocks, want 1", len(res.Content))
				}
				audio, ok := res.Content[0].(*mcp.AudioContent)
				if !ok {
					t.Fatalf("block is %T, want *mcp.AudioContent", res.Content[0])
				}
				if audio.MIMEType != "audio/wav" {
					t.Errorf("mimeType = %q, want audio/wav", audio.MIMEType)
				}
				checkWAV(t, audio.Data)
			},
		},
		{
			name: "document",
			tool: "document",
			check: func(t *testing.T, res *mcp.CallToolResult) {
				if len(res.Content) != 2 {
					t.Fatalf("got %d content blocks, want 2 (resource, text)", len(res.Content))
				}
				r, ok := res.Content[0].(*mcp.EmbeddedResource)
				if !ok {
					t.Fatalf("first block is %T, want *mcp.EmbeddedResource", res.Content[0])
				}
				if r.Resource.URI != "file:///demo/report.pdf" || r.Resource.MIMEType != "application/pdf" || r.Resource.Text != "" {
					t.Errorf("resource is %q (%q) with text %q, want file:///demo/report.pdf (application/pdf) with a blob", r.Resource.URI, r.Resource.MIMEType, r.Resource.Text)
				}
				checkPDF(t, r.Resource.Blob)
			},
		},
		{
			name: "icon",
			tool: "icon",
			check: func(t *testing.T, res *mcp.CallToolResult) {
				checkPNG(t, imageData(t, res, 0), 16, 16, 1, 1023)
			},
		},
		{
			name: "mixed",
			tool: "mixed",
			check: func(t *testing.T, res *mcp.CallToolResult) {
				var types []string
				for _, c := range res.Content {
					types = append(types, fmt.Sprintf("%T", c))
				}
				want := []string{"*mcp.TextContent", "*mcp.ImageContent", "*mcp.ResourceLink", "*mcp.ImageContent"}
				if diff := cmp.Diff(want, types); diff != "" {
					t.Fatalf("block types mismatch (-want +got):\n%s", diff)
				}
				checkPNG(t, imageData(t, res, 1), 256, 200, 200*1024, 220*1024)
				checkPNG(t, imageData(t, res, 3), 16, 16, 1, 1023)
			},
		},
	}
	// The SDK checks only that size_kib is an integer; the handler checks
	// its range. Either way the message names the argument.
	badSizes := []any{0, -1, 4097, 1.5, "200", nil}
	forEachPeer(t, func(t *testing.T, connect func(*testing.T, *mcp.ClientOptions) *peer) {
		p := connect(t, nil)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var results [2]*mcp.CallToolResult
				for i := range results {
					res, err := p.session.CallTool(t.Context(), &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
					if err != nil {
						t.Fatalf("tools/call %s: %v", tt.tool, err)
					}
					if res.IsError {
						t.Fatalf("tools/call %s failed: %v", tt.tool, res.Content)
					}
					results[i] = res
				}
				// Not cmp.Diff: it would print megabytes of base64.
				a, _ := json.Marshal(results[0])
				b, _ := json.Marshal(results[1])
				if !bytes.Equal(a, b) {
					t.Errorf("two calls of %s returned different results", tt.tool)
				}
				tt.check(t, results[0])
			})
		}
		for _, size := range badSizes {
			t.Run(fmt.Sprintf("picture size_kib %v", size), func(t *testing.T) {
				res, err := p.session.CallTool(t.Context(), &mcp.CallToolParams{Name: "picture", Arguments: map[string]any{"size_kib": size}})
				if err != nil {
					t.Fatalf("tools/call picture: got JSON-RPC error %v, want a tool error", err)
				}
				if !res.IsError || len(res.Content) != 1 {
					t.Fatalf("got %d blocks with isError %v, want one error block", len(res.Content), res.IsError)
				}
				if text, _ := res.Content[0].(*mcp.TextContent); text == nil || !strings.Contains(text.Text, "size_kib") {
					t.Errorf("error %v does not name size_kib", res.Content[0])
				}
			})
		}
	})
}

func TestServer_SlowProgress(t *testing.T) {
	forEachPeer(t, func(t *testing.T, connect func(*testing.T, *mcp.ClientOptions) *peer) {
		progress := make(chan mcp.ProgressNotificationParams, 10)
		p := connect(t, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				progress <- *req.Params
			},
		})
		params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": 2}}
		params.SetProgressToken("slow-1")
		res, err := p.session.CallTool(t.Context(), params)
		if err != nil {
			t.Fatalf("tools/call slow: %v", err)
		}
		if diff := cmp.Diff(textResult("slept 2 seconds"), res, cmpopts.IgnoreUnexported(mcp.CallToolResult{})); diff != "" {
			t.Errorf("slow result mismatch (-want +got):\n%s", diff)
		}
		// Notifications are sent before the result but may be handled after it.
		var got []mcp.ProgressNotificationParams
		for len(got) < 2 {
			select {
			case n := <-progress:
				got = append(got, n)
			case <-time.After(waitLimit):
				t.Fatalf("got %d progress notifications, want 2", len(got))
			}
		}
		slices.SortFunc(got, func(a, b mcp.ProgressNotificationParams) int { return int(a.Progress - b.Progress) })
		want := []mcp.ProgressNotificationParams{
			{ProgressToken: "slow-1", Progress: 1, Total: 2, Message: "step 1 of 2"},
			{ProgressToken: "slow-1", Progress: 2, Total: 2, Message: "step 2 of 2"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("progress notifications mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestServer_SlowCancelled(t *testing.T) {
	forEachPeer(t, func(t *testing.T, connect func(*testing.T, *mcp.ClientOptions) *peer) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// Cancel once the server is provably inside the handler.
		p := connect(t, &mcp.ClientOptions{
			ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { cancel() },
		})
		params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": 300}}
		params.SetProgressToken("slow-cancel")
		_, err := p.session.CallTool(ctx, params)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("tools/call slow after cancel: got error %v, want context.Canceled", err)
		}
		// The SDK sent notifications/cancelled; the handler must observe it
		// long before its 300 seconds are up.
		waitCtx, stop := context.WithTimeout(t.Context(), waitLimit)
		defer stop()
		if _, err := p.stderr.wait(waitCtx, regexp.MustCompile(`^slow: cancelled after [1-9][0-9]* steps$`)); err != nil {
			t.Fatalf("server never reported the cancellation on stderr: %v", err)
		}
		// The session survives a cancelled call.
		res, err := p.session.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}})
		if err != nil {
			t.Fatalf("tools/call echo after cancel: %v", err)
		}
		if diff := cmp.Diff(textResult("still here"), res, cmpopts.IgnoreUnexported(mcp.CallToolResult{})); diff != "" {
			t.Errorf("echo after cancel mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestServer_ProtocolVersions checks the pin: the server negotiates only
// 2025-11-25, 2025-06-18 and 2025-03-26, and answers anything else with
// 2025-11-25.
func TestServer_ProtocolVersions(t *testing.T) {
	tests := []struct {
		name      string
		requested string
		want      string
	}{
		{name: "sdk latest falls back from server/discover", requested: "", want: "2025-11-25"},
		{name: "2025-11-25", requested: "2025-11-25", want: "2025-11-25"},
		{name: "2025-06-18", requested: "2025-06-18", want: "2025-06-18"},
		{name: "2025-03-26", requested: "2025-03-26", want: "2025-03-26"},
		{name: "2024-11-05 is not served", requested: "2024-11-05", want: "2025-11-25"},
	}
	for _, tr := range transports {
		for _, tt := range tests {
			t.Run(tr.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "v0"}, nil)
				p := tr.connect(t, client, tt.requested)
				if got := p.session.InitializeResult().ProtocolVersion; got != tt.want {
					t.Errorf("negotiated %q, want %q", got, tt.want)
				}
				// The session works at that version.
				if _, err := p.session.ListTools(t.Context(), nil); err != nil {
					t.Errorf("tools/list: %v", err)
				}
			})
		}
	}
}

// TestBinary_HTTP runs the built binary with -http 127.0.0.1:0, reads the
// address it prints, uses it, and stops it with SIGTERM while a session (and
// its standalone SSE stream) is still open.
func TestBinary_HTTP(t *testing.T) {
	stderr := newLines()
	stderr.logOnFailure(t, "the demo server's stderr")
	cmd := exec.Command(demoBin, "-http", "127.0.0.1:0", "-name", "demo-bin")
	cmd.Env = []string{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// Only does anything if the test failed before the SIGTERM below.
		cmd.Process.Kill()
		<-exited
	})

	waitCtx, stop := context.WithTimeout(t.Context(), waitLimit)
	defer stop()
	line, err := stderr.wait(waitCtx, regexp.MustCompile(`^listening on http://127\.0\.0\.1:[0-9]+/mcp$`))
	if err != nil {
		t.Fatalf("no listening line on stderr: %v", err)
	}
	endpoint := line[len("listening on "):]

	client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "v0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Name; got != "demo-bin" {
		t.Errorf("serverInfo.name = %q, want demo-bin (from -name)", got)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over http"}})
	if err != nil {
		t.Fatalf("tools/call echo: %v", err)
	}
	if diff := cmp.Diff(textResult("over http"), res, cmpopts.IgnoreUnexported(mcp.CallToolResult{})); diff != "" {
		t.Errorf("echo mismatch (-want +got):\n%s", diff)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Errorf("after SIGTERM: %v, want a clean exit", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("server did not exit after SIGTERM")
	}
}

// TestRun_HTTPShutdown runs run in-process over HTTP and cancels its context,
// as a signal would.
func TestRun_HTTPShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stderr := newLines()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-http", "127.0.0.1:0"}, stderr, testLookupEnv) }()

	waitCtx, stop := context.WithTimeout(t.Context(), waitLimit)
	defer stop()
	line, err := stderr.wait(waitCtx, regexp.MustCompile(`^listening on http://127\.0\.0\.1:[0-9]+/mcp$`))
	if err != nil {
		cancel()
		<-done
		t.Fatalf("no listening line on stderr: %v", err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "v0"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: line[len("listening on "):]}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-03-26"})
	if err != nil {
		cancel()
		<-done
		t.Fatalf("connecting: %v", err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Name; got != "demo" {
		t.Errorf("serverInfo.name = %q, want the default demo", got)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
}

func TestRun_BadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want error
	}{
		{name: "help", args: []string{"-h"}, want: flag.ErrHelp},
		{name: "unknown flag", args: []string{"-port", "1"}, want: errUsage},
		{name: "positional argument", args: []string{"stdio"}, want: errUsage},
		{name: "unknown transport", args: []string{"-transport", "sse"}, want: errUsage},
		{name: "http address with stdio", args: []string{"-transport", "stdio", "-http", "127.0.0.1:0"}, want: errUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := run(t.Context(), tt.args, &stderr, testLookupEnv)
			if !errors.Is(err, tt.want) {
				t.Errorf("run(%q) = %v, want %v", tt.args, err, tt.want)
			}
			if stderr.Len() == 0 {
				t.Errorf("run(%q) explained nothing on stderr", tt.args)
			}
		})
	}
}

// fixture returns what a lazily built media fixture holds, failing the test
// if it could not be built.
func fixture(t *testing.T, get func() ([]byte, error)) []byte {
	t.Helper()
	data, err := get()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// imageData returns the data of res's i'th block, which must be the only
// block if i is 0 and a PNG image in any case.
func imageData(t *testing.T, res *mcp.CallToolResult, i int) []byte {
	t.Helper()
	if i == 0 && len(res.Content) != 1 {
		t.Fatalf("got %d content blocks, want 1", len(res.Content))
	}
	img, ok := res.Content[i].(*mcp.ImageContent)
	if !ok {
		t.Fatalf("block %d is %T, want *mcp.ImageContent", i, res.Content[i])
	}
	if img.MIMEType != "image/png" {
		t.Errorf("block %d: mimeType = %q, want image/png", i, img.MIMEType)
	}
	return img.Data
}

// checkPNG checks that data is a whole, valid w×h PNG of minSize to maxSize
// bytes.
func checkPNG(t *testing.T, data []byte, w, h, minSize, maxSize int) {
	t.Helper()
	if len(data) < minSize || len(data) > maxSize {
		t.Errorf("PNG is %d bytes, want %d to %d", len(data), minSize, maxSize)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("decoding PNG header: %v", err)
	}
	if cfg.Width != w || cfg.Height != h {
		t.Errorf("PNG is %dx%d, want %dx%d", cfg.Width, cfg.Height, w, h)
	}
	// DecodeConfig reads only the header; check the pixels and CRCs too.
	if _, err := png.Decode(bytes.NewReader(data)); err != nil {
		t.Errorf("decoding PNG: %v", err)
	}
}

// checkWAV checks that data is one second of a 440 Hz tone as a canonical
// 44-byte-header WAV of 16-bit mono PCM at 8 kHz.
func checkWAV(t *testing.T, data []byte) {
	t.Helper()
	if len(data) < 44 {
		t.Fatalf("WAV is %d bytes, shorter than its header", len(data))
	}
	le := binary.LittleEndian
	type header struct {
		RIFF, WAVE, Fmt, Data                    string
		RIFFSize, FmtSize, Rate, ByteRate, Size  uint32
		Format, Channels, BlockAlign, SampleBits uint16
	}
	got := header{
		RIFF: string(data[0:4]), RIFFSize: le.Uint32(data[4:]), WAVE: string(data[8:12]),
		Fmt: string(data[12:16]), FmtSize: le.Uint32(data[16:]), Format: le.Uint16(data[20:]), Channels: le.Uint16(data[22:]),
		Rate: le.Uint32(data[24:]), ByteRate: le.Uint32(data[28:]), BlockAlign: le.Uint16(data[32:]), SampleBits: le.Uint16(data[34:]),
		Data: string(data[36:40]), Size: le.Uint32(data[40:]),
	}
	want := header{
		RIFF: "RIFF", RIFFSize: uint32(len(data) - 8), WAVE: "WAVE",
		Fmt: "fmt ", FmtSize: 16, Format: 1, Channels: 1,
		Rate: 8000, ByteRate: 16000, BlockAlign: 2, SampleBits: 16,
		Data: "data", Size: 16000,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("WAV header mismatch (-want +got):\n%s", diff)
	}
	if len(data) != 44+16000 {
		t.Fatalf("WAV is %d bytes, want 44 + 16000", len(data))
	}
	// A 440 Hz sine rises through zero 440 times a second.
	rises := 0
	for i := 46; i < len(data); i += 2 {
		if int16(le.Uint16(data[i-2:])) < 0 && int16(le.Uint16(data[i:])) >= 0 {
			rises++
		}
	}
	if rises < 439 || rises > 441 {
		t.Errorf("the tone rises through zero %d times in a second, want about 440", rises)
	}
}

var (
	startxrefRE = regexp.MustCompile(`\nstartxref\n([0-9]+)\n%%EOF$`)
	xrefEntryRE = regexp.MustCompile(`([0-9]{10}) ([0-9]{5}) ([fn]) \n`)
)

// checkPDF checks that data is a PDF 1.4 file of more than 8 KiB that shows
// "mcpgw demo report", and that its cross-reference table points at its
// objects.
func checkPDF(t *testing.T, data []byte) {
	t.Helper()
	if !bytes.HasPrefix(data, []byte("%PDF-1.4\n")) {
		t.Errorf("PDF starts with %q, want %%PDF-1.4", data[:min(len(data), 9)])
	}
	if !bytes.HasSuffix(data, []byte("%%EOF")) {
		t.Errorf("PDF does not end with %%%%EOF")
	}
	if len(data) <= 8*1024 {
		t.Errorf("PDF is %d bytes, want more than 8 KiB", len(data))
	}
	if !bytes.Contains(data, []byte("(mcpgw demo report) Tj")) {
		t.Errorf("PDF does not show the text mcpgw demo report")
	}
	m := startxrefRE.FindSubmatch(data)
	if m == nil {
		t.Fatal("PDF has no startxref before its end-of-file marker")
	}
	xref, _ := strconv.Atoi(string(m[1]))
	if xref >= len(data) || !bytes.HasPrefix(data[xref:], []byte("xref\n0 6\n")) {
		t.Fatalf("startxref %d does not point at a cross-reference table of 6 entries", xref)
	}
	entries := xrefEntryRE.FindAllSubmatch(data[xref:], -1)
	if len(entries) != 6 {
		t.Fatalf("cross-reference table has %d entries, want 6", len(entries))
	}
	for obj, e := range entries[1:] {
		off, _ := strconv.Atoi(string(e[1]))
		if string(e[3]) != "n" || off >= len(data) || !bytes.HasPrefix(data[off:], fmt.Appendf(nil, "%d 0 obj\n", obj+1)) {
			t.Errorf("cross-reference entry %q does not point at object %d", e[0], obj+1)
		}
	}
}

func decode(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// lines is an io.Writer, safe for concurrent use, that keeps what is written
// to it as lines and lets a test wait for one.
type lines struct {
	mu      sync.Mutex
	partial []byte
	all     []string
	changed chan struct{} // closed and replaced when a line is added
}

func newLines() *lines { return &lines{changed: make(chan struct{})} }

// logOnFailure shows the lines in the test's log if the test fails, after
// the cleanups registered later (the server's stop among them).
func (l *lines) logOnFailure(t *testing.T, what string) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s:\n%s", what, l)
		}
	})
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.all = append(l.all, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
		close(l.changed)
		l.changed = make(chan struct{})
	}
	return len(p), nil
}

// wait returns the first line that matches re, waiting for it until ctx is done.
func (l *lines) wait(ctx context.Context, re *regexp.Regexp) (string, error) {
	for {
		l.mu.Lock()
		for _, line := range l.all {
			if re.MatchString(line) {
				l.mu.Unlock()
				return line, nil
			}
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for a line matching %q: %w; got:\n%s", re, context.Cause(ctx), l)
		}
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b bytes.Buffer
	for _, line := range l.all {
		fmt.Fprintln(&b, line)
	}
	b.Write(l.partial)
	return b.String()
}
