package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgw/mcpgw/config"
	"github.com/mcpgw/mcpgw/mediastore"
	"github.com/mcpgw/mcpgw/upstream"
	"github.com/mcpgw/mcpgw/upstream/upstreamtest"
)

// mediaFake is a server whose tool "pic" answers a text block, a large
// image and a small one, whose prompt "p" has a large image message, and
// whose resource "file:///big.bin" is a large blob.
func mediaFake(name string) *upstreamtest.Server {
	return &upstreamtest.Server{Name: name,
		Tools:     raws(`{"name":"pic","inputSchema":{"type":"object"}}`),
		Prompts:   raws(`{"name":"p"}`),
		Resources: raws(`{"uri":"file:///big.bin","name":"big"}`),
		Handle: func(_ context.Context, method string, _ json.RawMessage, _ *upstream.CallHooks) (json.RawMessage, error) {
			switch method {
			case "tools/call":
				return json.RawMessage(`{"content":[{"type":"text","text":"here"},` + imageBlock(bigPNG) + `,` + imageBlock(smallPNG) + `],"structuredContent":{"n":1}}`), nil
			case "prompts/get":
				return json.RawMessage(`{"messages":[{"role":"user","content":` + imageBlock(bigPNG) + `}]}`), nil
			case "resources/read":
				return json.RawMessage(`{"contents":[{"uri":"file:///big.bin","mimeType":"application/octet-stream","blob":"` + base64.StdEncoding.EncodeToString(bigPNG) + `"}]}`), nil
			}
			return json.RawMessage(`{}`), nil
		}}
}

var (
	bigPNG   = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 10000)...)
	smallPNG = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{8}, 100)...)
)

func imageBlock(data []byte) string {
	return `{"type":"image","mimeType":"image/png","data":"` + base64.StdEncoding.EncodeToString(data) + `","annotations":{"priority":0.5}}`
}

func newMediaCore(t *testing.T, mc config.Media, servers []config.Server, ups ...*upstreamtest.Server) (*Server, *mediastore.Store) {
	t.Helper()
	if mc.Mode == "" {
		mc.Mode = config.MediaLink
	}
	if mc.MinBytes == 0 {
		mc.MinBytes = config.DefaultMediaMinBytes
	}
	return newMediaCoreRaw(t, mc, servers, ups...)
}

// links returns the uris of the resource_link blocks of a result's content.
func links(t *testing.T, body json.RawMessage) (uris []string, types []string) {
	t.Helper()
	var res struct {
		Content []struct {
			Type, URI, Name, MIMEType string
			Size                      int
			Annotations               json.RawMessage
		}
	}
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	for _, b := range res.Content {
		types = append(types, b.Type)
		if b.Type == "resource_link" {
			uris = append(uris, b.URI)
			if b.MIMEType != "image/png" || b.Size != len(bigPNG) || string(b.Annotations) != `{"priority":0.5}` {
				t.Errorf("link block = %+v, want image/png, size %d and the annotations", b, len(bigPNG))
			}
		}
	}
	return uris, types
}

func TestMedia_ToolResult(t *testing.T) {
	s, _ := newMediaCore(t, config.Media{}, []config.Server{{Name: "m"}, {Name: "raw", Media: config.ServerMedia{Mode: config.MediaInline}}},
		mediaFake("m"), mediaFake("raw"))
	callTool := func(tool string, req *Request) json.RawMessage {
		t.Helper()
		req.Method = "tools/call"
		req.Params = json.RawMessage(`{"name":"` + tool + `"}`)
		body, err := call(t, s, req)
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	alice := func() *Request { return &Request{Principal: "alice", Session: "A"} }
	body := callTool("mcp__m__pic", alice())
	uris, types := links(t, body)
	if strings.Join(types, ",") != "text,resource_link,image" || len(uris) != 1 {
		t.Fatalf("blocks %v: want the large image linked, the text and the small image kept: %s", types, body)
	}
	if !strings.HasPrefix(uris[0], "http://gw.example/media/") || !strings.HasSuffix(uris[0], ".png") {
		t.Errorf("link %q, want http://gw.example/media/<id>.png", uris[0])
	}
	if !strings.Contains(string(body), `"structuredContent":{"n":1}`) {
		t.Errorf("structuredContent lost: %s", body)
	}

	// The same content for the same principal: the same URL; for another
	// principal, another; through a trusted proxy, its base URL.
	if again, _ := links(t, callTool("mcp__m__pic", alice())); again[0] != uris[0] {
		t.Errorf("the same image twice: %q then %q", uris[0], again[0])
	}
	if bob, _ := links(t, callTool("mcp__m__pic", &Request{Principal: "bob", Session: "B"})); bob[0] == uris[0] {
		t.Errorf("two principals share the URL %q", bob[0])
	}
	proxied := alice()
	proxied.BaseURL = "https://mcp.example.com"
	if p, _ := links(t, callTool("mcp__m__pic", proxied)); !strings.HasPrefix(p[0], "https://mcp.example.com/media/") {
		t.Errorf("link through a proxy = %q", p[0])
	}

	// A server set to inline keeps its blobs.
	if _, types := links(t, callTool("mcp__raw__pic", alice())); strings.Join(types, ",") != "text,image,image" {
		t.Errorf("inline server's blocks = %v", types)
	}

	// resources/read of the link: the owner gets the bytes, nobody else.
	read := func(req *Request) (json.RawMessage, error) {
		req.Method = "resources/read"
		req.Params = json.RawMessage(`{"uri":"` + uris[0] + `"}`)
		return call(t, s, req)
	}
	got, err := read(alice())
	if err != nil {
		t.Fatal(err)
	}
	var rr struct {
		Contents []struct {
			URI, MIMEType string
			Blob          []byte
		}
	}
	json.Unmarshal(got, &rr)
	if len(rr.Contents) != 1 || !bytes.Equal(rr.Contents[0].Blob, bigPNG) || rr.Contents[0].MIMEType != "image/png" || rr.Contents[0].URI != uris[0] {
		t.Errorf("resources/read of the media link = %.200s", got)
	}
	for _, other := range []*Request{{Principal: "bob", Session: "B"}, {Principal: Anonymous, Session: "A"}} {
		_, err := read(other)
		assertCode(t, err, CodeResourceNotFound, "unknown or has expired")
	}
}

func TestMedia_AnonymousBySession(t *testing.T) {
	s, _ := newMediaCore(t, config.Media{}, nil, mediaFake("m"))
	body, err := call(t, s, &Request{Method: "tools/call", Principal: Anonymous, Session: "A", Params: json.RawMessage(`{"name":"mcp__m__pic"}`)})
	if err != nil {
		t.Fatal(err)
	}
	uris, _ := links(t, body)
	other, _ := call(t, s, &Request{Method: "tools/call", Principal: Anonymous, Session: "B", Params: json.RawMessage(`{"name":"mcp__m__pic"}`)})
	if u2, _ := links(t, other); u2[0] == uris[0] {
		t.Errorf("two anonymous sessions share the URL %q", uris[0])
	}
	_, err = call(t, s, &Request{Method: "resources/read", Principal: Anonymous, Session: "B", Params: json.RawMessage(`{"uri":"` + uris[0] + `"}`)})
	assertCode(t, err, CodeResourceNotFound, "unknown or has expired")
}

func TestMedia_Settings(t *testing.T) {
	tests := []struct {
		name      string
		media     config.Media
		wantTypes string // tools/call blocks
		promptTyp string // prompts/get message block
		readField string // what resources/read's content carries
	}{
		{"link", config.Media{Mode: config.MediaLink, MinBytes: 4096}, "text,resource_link,image", "image", "blob"},
		{"link+markdown", config.Media{Mode: config.MediaLinkMarkdown, MinBytes: 4096}, "text,resource_link,text,image", "image", "blob"},
		{"inline", config.Media{Mode: config.MediaInline, MinBytes: 4096}, "text,image,image", "image", "blob"},
		{"every size", config.Media{Mode: config.MediaLink, MinBytes: 0}, "text,resource_link,resource_link", "image", "blob"},
		{"resources too", config.Media{Mode: config.MediaLink, MinBytes: 4096, RewriteResources: true}, "text,resource_link,image", "resource_link", "text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newMediaCoreRaw(t, tt.media, nil, mediaFake("m"))
			req := func(method, params string) json.RawMessage {
				t.Helper()
				body, err := call(t, s, &Request{Method: method, Principal: "alice", Params: json.RawMessage(params)})
				if err != nil {
					t.Fatal(err)
				}
				return body
			}
			var res struct{ Content []struct{ Type, Text string } }
			json.Unmarshal(req("tools/call", `{"name":"mcp__m__pic"}`), &res)
			var types []string
			for _, b := range res.Content {
				types = append(types, b.Type)
				if b.Type == "text" && b.Text != "here" && !strings.HasPrefix(b.Text, "![") {
					t.Errorf("text block %q", b.Text)
				}
			}
			if got := strings.Join(types, ","); got != tt.wantTypes {
				t.Errorf("tools/call blocks = %s, want %s", got, tt.wantTypes)
			}
			var pr struct {
				Messages []struct{ Content struct{ Type string } }
			}
			json.Unmarshal(req("prompts/get", `{"name":"mcp__m__p"}`), &pr)
			if len(pr.Messages) != 1 || pr.Messages[0].Content.Type != tt.promptTyp {
				t.Errorf("prompts/get = %+v, want a %s block", pr, tt.promptTyp)
			}
			var rr struct {
				Contents []map[string]any
			}
			json.Unmarshal(req("resources/read", `{"uri":"file:///big.bin"}`), &rr)
			if len(rr.Contents) != 1 || rr.Contents[0][tt.readField] == nil {
				t.Errorf("resources/read = %+v, want %s", rr, tt.readField)
			}
		})
	}
}

// newMediaCoreRaw is newMediaCore without defaults for the media config.
func newMediaCoreRaw(t *testing.T, mc config.Media, servers []config.Server, ups ...*upstreamtest.Server) (*Server, *mediastore.Store) {
	t.Helper()
	ms, err := mediastore.New(mediastore.Options{Dir: t.TempDir(), Secret: []byte(strings.Repeat("m", 32))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	return newCore(t, upstreamtest.NewManager(ups...), Options{Media: ms, MediaConfig: mc, PublicURL: "http://gw.example", Servers: servers}), ms
}

// TestExposeResult_OnlyText holds exposeResult's shortcut for text-only
// results to what the two rewrites it skips would have made of each body:
// the same bytes, and the shortcut taken only where it says.
func TestExposeResult_OnlyText(t *testing.T) {
	s, _ := newMediaCore(t, config.Media{MinBytes: 1}, []config.Server{{Name: "m"}}, mediaFake("m"))
	req := &Request{Principal: "alice", Session: "A", Method: "tools/call"}
	cat := s.cat.Load()
	long := strings.Repeat(`line \"quoted\" and \\ more\n`, 500)
	for _, tc := range []struct {
		name    string
		body    string
		only    bool
		changes bool // the rewrites change it: a shortcut there would show
	}{
		{name: "one text block", body: `{"content":[{"type":"text","text":"hi"}],"isError":false}`, only: true},
		{name: "a long text full of escapes", body: `{"content":[{"type":"text","text":"` + long + `"},{"text":"b","type":"text"}]}`, only: true},
		{name: "no blocks", body: `{"content":[]}`, only: true},
		{name: "spaces", body: `{ "content" : [ { "type" : "text" , "text" : "hi" } ] }`, only: true},
		{name: "an image", body: `{"content":[{"type":"text","text":"hi"},` + imageBlock(bigPNG) + `]}`, changes: true},
		{name: "a resource link", body: `{"content":[{"type":"resource_link","uri":"file:///a.txt","name":"a"}]}`},              // its bare URI is recorded for routing: not a text block
		{name: "an embedded resource", body: `{"content":[{"type":"resource","resource":{"uri":"file:///a.txt","text":"x"}}]}`}, // its bare URI is recorded for routing: not a text block
		{name: "the last type wins", body: `{"content":[{"type":"text","type":"image","mimeType":"image/png","data":"` + base64.StdEncoding.EncodeToString(bigPNG) + `"}]}`, changes: true},
		{name: "an escaped key", body: `{"content":[{"type":"text","t\u0079pe":"image","mimeType":"image/png","data":"` + base64.StdEncoding.EncodeToString(bigPNG) + `"}]}`, changes: true},
		{name: "an escaped type", body: `{"content":[{"type":"te\u0078t","text":"hi"}]}`},
		{name: "no type", body: `{"content":[{"text":"hi"}]}`},
		{name: "not an array", body: `{"content":{"type":"text"}}`},
		{name: "no content", body: `{"isError":true}`},
		{name: "content given twice", body: `{"content":[{"type":"resource_link","uri":"file:///a.txt","name":"a"}],"content":[{"type":"text","text":"hi"}]}`}, // the exposure records the first copy's URI
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := json.RawMessage(tc.body)
			if got := onlyText(body, "content"); got != tc.only {
				t.Errorf("onlyText = %v, want %v", got, tc.only)
			}
			want := s.rewriteMedia(req, "m", s.exposeURIs(cat, req.Principal, "m", body, "content", false), "content", false)
			if changed := !bytes.Equal(want, body); changed != tc.changes {
				t.Errorf("the rewrites changed it: %v, want %v", changed, tc.changes)
			}
			if got := s.exposeResult(cat, req, "m", body, "content", false); !bytes.Equal(got, want) {
				t.Errorf("exposeResult:\n%.300s\nthe two rewrites:\n%.300s", got, want)
			}
		})
	}
}

// BenchmarkOnlyText tells a 64 KiB text result from one with media, with
// plain text and with a JSON document as the text (every quote escaped).
func BenchmarkOnlyText(b *testing.B) {
	var doc strings.Builder
	for i := 0; doc.Len() < 64<<10; i++ {
		doc.WriteString(`{"id":1,"name":"item","tags":["a","b"]},`)
	}
	jsonText, _ := json.Marshal(doc.String())
	for _, bc := range []struct{ name, text string }{
		{"plain", `"` + strings.Repeat("x", 64<<10) + `"`},
		{"json", string(jsonText)},
	} {
		body := json.RawMessage(`{"content":[{"type":"text","text":` + bc.text + `}],"isError":false}`)
		b.Run(bc.name, func(b *testing.B) {
			if !onlyText(body, "content") {
				b.Fatal("not text")
			}
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				onlyText(body, "content")
			}
		})
	}
}
