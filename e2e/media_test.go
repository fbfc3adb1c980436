package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/mcpgw/internal/rawclient"
)

// The media tests run the gateway in front of the demo server,
// whose picture (a 200 KiB PNG), sound (a WAV), document (an embedded PDF)
// and icon (a tiny PNG) tools always return the same bytes, and compare
// what a real client gets through the gateway, and then fetches from the
// links, with what the demo server returns directly.

// mediaGateway runs the demo server over HTTP (for the direct calls) and a
// gateway in front of it with media settings extra.
func mediaGateway(t *testing.T, extra string) (g *gateway, direct *mcp.ClientSession) {
	t.Helper()
	demoURL, _ := startDemoHTTP(t, "demo-media")
	g = startGateway(t, baseEnv(), fmt.Sprintf("%s\nservers:\n  - name: demo\n    transport: http\n    url: %s\n", extra, demoURL))
	g.waitState(t, "demo", "running")
	return g, connect(t, demoURL, "")
}

// callTool calls a tool that must succeed.
func callTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("tools/call %s: %v %v", name, err, res)
	}
	return res
}

// fetch GETs a URL without any credentials, and returns the response and
// its body.
func fetch(t testing.TB, u string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

var mediaURL = regexp.MustCompile(`^http://127\.0\.0\.1:\d+/media/[a-z2-7]{52}\.[a-z0-9]+(\?exp=\d+&sig=[A-Za-z0-9_-]+)?$`)

// blob returns the bytes and MIME type of a direct result's one media block.
func blob(t testing.TB, res *mcp.CallToolResult) ([]byte, string) {
	t.Helper()
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.ImageContent:
			return c.Data, c.MIMEType
		case *mcp.AudioContent:
			return c.Data, c.MIMEType
		case *mcp.EmbeddedResource:
			return c.Resource.Blob, c.Resource.MIMEType
		}
	}
	t.Fatalf("no media block in %v", res.Content)
	return nil, ""
}

func TestMedia_Links(t *testing.T) {
	g, direct := mediaGateway(t, "")
	cs := connect(t, g.URL+"/mcp", "2025-11-25")

	for _, tc := range []struct {
		tool, ext, mime, name string
		annotated             bool
	}{
		{"picture", "png", "image/png", "image-", true},
		{"sound", "wav", "audio/wav", "audio-", true},
		{"document", "pdf", "application/pdf", "report.pdf", false},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			want, wantMIME := blob(t, callTool(t, direct, tc.tool, nil))
			res := callTool(t, cs, "mcp__demo__"+tc.tool, nil)
			var link *mcp.ResourceLink
			for _, c := range res.Content {
				switch c := c.(type) {
				case *mcp.ResourceLink:
					link = c
				case *mcp.ImageContent, *mcp.AudioContent, *mcp.EmbeddedResource:
					t.Errorf("a %T block came through with its bytes", c)
				}
			}
			if link == nil {
				t.Fatalf("no resource_link in %v", res.Content)
			}
			if !mediaURL.MatchString(link.URI) || !strings.HasSuffix(link.URI, "."+tc.ext) || !strings.HasPrefix(link.URI, g.URL+"/media/") {
				t.Errorf("link uri %q, want %s/media/<id>.%s", link.URI, g.URL, tc.ext)
			}
			if link.MIMEType != wantMIME || wantMIME != tc.mime || link.Size == nil || *link.Size != int64(len(want)) || !strings.HasPrefix(link.Name, tc.name) {
				t.Errorf("link = %+v (size %v), want %s, size %d, name %s…", link, link.Size, tc.mime, len(want), tc.name)
			}
			if tc.annotated && link.Annotations == nil {
				t.Errorf("link lost the block's annotations: %+v", link)
			}

			resp, body := fetch(t, link.URI, nil)
			if resp.StatusCode != 200 || !bytes.Equal(body, want) || resp.Header.Get("Content-Type") != tc.mime {
				t.Errorf("GET %s = %d %s, %d bytes (same as the server's: %v)", link.URI, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), bytes.Equal(body, want))
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("ETag") == "" || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
				t.Errorf("GET %s headers = %v", link.URI, resp.Header)
			}
			resp, body = fetch(t, link.URI, map[string]string{"Range": "bytes=0-9"})
			if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, want[:10]) {
				t.Errorf("GET %s with a range = %d, %q", link.URI, resp.StatusCode, body)
			}

			// The owner reads it through MCP too.
			rr, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: link.URI})
			if err != nil || len(rr.Contents) != 1 || !bytes.Equal(rr.Contents[0].Blob, want) {
				t.Errorf("resources/read %s = %v, %v", link.URI, rr, err)
			}
		})
	}

	t.Run("icon stays inline", func(t *testing.T) {
		want, _ := blob(t, callTool(t, direct, "icon", nil))
		res := callTool(t, cs, "mcp__demo__icon", nil)
		if len(res.Content) != 1 {
			t.Fatalf("content = %v", res.Content)
		}
		img, ok := res.Content[0].(*mcp.ImageContent)
		if !ok || !bytes.Equal(img.Data, want) {
			t.Errorf("icon = %T, want its image block as it was", res.Content[0])
		}
	})

	t.Run("mixed", func(t *testing.T) {
		res := callTool(t, cs, "mcp__demo__mixed", nil)
		var kinds []string
		for _, c := range res.Content {
			switch c := c.(type) {
			case *mcp.TextContent:
				kinds = append(kinds, "text:"+c.Text)
			case *mcp.ResourceLink:
				if c.URI == "https://example.com/doc" {
					kinds = append(kinds, "link:doc")
				} else if mediaURL.MatchString(c.URI) {
					kinds = append(kinds, "link:media")
				}
			case *mcp.ImageContent:
				kinds = append(kinds, "image")
			}
		}
		if got := strings.Join(kinds, ","); got != "text:before,link:media,link:doc,image" {
			t.Errorf("mixed content = %s", got)
		}
		if res.StructuredContent == nil {
			t.Error("structuredContent lost")
		}
	})

	t.Run("another session cannot read it", func(t *testing.T) {
		res := callTool(t, cs, "mcp__demo__picture", nil)
		link := res.Content[0].(*mcp.ResourceLink)
		other := connect(t, g.URL+"/mcp", "2025-11-25")
		if _, err := other.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: link.URI}); err == nil || !strings.Contains(err.Error(), "unknown or has expired") {
			t.Errorf("another session's resources/read of the link = %v, want not found", err)
		}
	})

	t.Run("2025-03-26 gets the URL as text", func(t *testing.T) {
		old := connect(t, g.URL+"/mcp", "2025-03-26")
		res := callTool(t, old, "mcp__demo__picture", nil)
		tc, ok := res.Content[0].(*mcp.TextContent)
		if !ok || !regexp.MustCompile(`^image-[a-z2-7]{8}\.png: http://127\.0\.0\.1:\d+/media/[a-z2-7]{52}\.png$`).MatchString(tc.Text) {
			t.Errorf("2025-03-26 content = %#v, want a text block naming the URL", res.Content[0])
		}
	})

	t.Run("names", func(t *testing.T) {
		for _, name := range []string{
			"../mcpgw.db", "..%2fmcpgw.db", "%2e%2e%2fmcpgw.db", "x.png", strings.Repeat("a", 52) + ".PNG",
			strings.Repeat("A", 52) + ".png", strings.Repeat("a", 52), strings.Repeat("a", 52) + ".png%00", strings.Repeat("a", 52) + "..png",
			strings.Repeat("a", 52) + ".png", // well formed, unknown
		} {
			resp, body := fetch(t, g.URL+"/media/"+name, nil)
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET /media/%s = %d %q, want 404", name, resp.StatusCode, body)
			}
		}
		req, _ := http.NewRequest("POST", g.URL+"/media/"+strings.Repeat("a", 52)+".png", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST /media = %d, want 405", resp.StatusCode)
		}
	})
}

func TestMedia_SignedURLs(t *testing.T) {
	g, _ := mediaGateway(t, "media:\n  signed_urls: true\n  url_ttl: 1h\n")
	cs := connect(t, g.URL+"/mcp", "")
	link := callTool(t, cs, "mcp__demo__picture", nil).Content[0].(*mcp.ResourceLink)
	if !mediaURL.MatchString(link.URI) || !strings.Contains(link.URI, "?exp=") {
		t.Fatalf("signed link %q", link.URI)
	}
	if resp, _ := fetch(t, link.URI, nil); resp.StatusCode != 200 {
		t.Errorf("GET the signed URL = %d", resp.StatusCode)
	}
	u, _ := url.Parse(link.URI)
	q := u.Query()
	sig := q.Get("sig")
	tampered := []byte(sig)
	tampered[0] ^= 1
	if tampered[0] == sig[0] {
		tampered[0] = 'A'
	}
	exp := q.Get("exp")
	for name, query := range map[string]string{
		"no signature":         "",
		"tampered signature":   "exp=" + exp + "&sig=" + string(tampered),
		"later expiry":         "exp=" + fmt.Sprint(time.Now().Add(48*time.Hour).Unix()) + "&sig=" + sig,
		"expired":              "exp=" + fmt.Sprint(time.Now().Add(-time.Minute).Unix()) + "&sig=" + sig,
		"signature, no expiry": "sig=" + sig,
	} {
		v := *u
		v.RawQuery = query
		if resp, _ := fetch(t, v.String(), nil); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: GET %s = %d, want 403", name, v.String(), resp.StatusCode)
		}
	}
}

func TestMedia_EvictionAndExpiry(t *testing.T) {
	t.Run("eviction", func(t *testing.T) {
		// Room for one 200 KiB picture: the second evicts the first.
		g, _ := mediaGateway(t, "media:\n  max_bytes: 300KiB\n")
		cs := connect(t, g.URL+"/mcp", "")
		first := callTool(t, cs, "mcp__demo__picture", nil).Content[0].(*mcp.ResourceLink)
		if resp, _ := fetch(t, first.URI, nil); resp.StatusCode != 200 {
			t.Fatalf("GET the first picture = %d", resp.StatusCode)
		}
		second := callTool(t, cs, "mcp__demo__picture", map[string]any{"size_kib": 201}).Content[0].(*mcp.ResourceLink)
		if resp, _ := fetch(t, first.URI, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET the evicted picture = %d, want 404", resp.StatusCode)
		}
		if resp, _ := fetch(t, second.URI, nil); resp.StatusCode != 200 {
			t.Errorf("GET the second picture = %d, want 200", resp.StatusCode)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		g, _ := mediaGateway(t, "media:\n  max_age: 1s\n")
		cs := connect(t, g.URL+"/mcp", "")
		link := callTool(t, cs, "mcp__demo__sound", nil).Content[0].(*mcp.ResourceLink)
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, _ := fetch(t, link.URI, nil)
			if resp.StatusCode == http.StatusNotFound {
				break
			}
			if resp.StatusCode != 200 || time.Now().After(deadline) {
				t.Fatalf("GET a blob past its max_age = %d", resp.StatusCode)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

func TestMedia_TrustedProxy(t *testing.T) {
	forwarded := http.Header{"X-Forwarded-Proto": {"https"}, "X-Forwarded-Host": {"mcp.example.com"}}
	for _, tc := range []struct {
		name, config, wantPrefix string
	}{
		{"trusted", "trusted_proxies: [\"127.0.0.1\"]\n", "https://mcp.example.com/media/"},
		{"not trusted", "trusted_proxies: [\"10.0.0.0/8\"]\n", "http://127.0.0.1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := mediaGateway(t, tc.config)
			c, err := rawclient.Dial(ctxT(t), g.URL+"/mcp", rawclient.Options{Header: forwarded})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			raw, err := c.Call(ctxT(t), "tools/call", map[string]any{"name": "mcp__demo__picture"})
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				Content []struct{ Type, URI string }
			}
			json.Unmarshal(raw, &res)
			if len(res.Content) != 1 || res.Content[0].Type != "resource_link" || !strings.HasPrefix(res.Content[0].URI, tc.wantPrefix) {
				t.Errorf("content = %+v, want a link starting %s", res.Content, tc.wantPrefix)
			}
		})
	}
}

// TestMedia_TaskResult: the result of a task (here one the gateway hosts,
// the demo server having no tasks) gets its media linked like a call's.
func TestMedia_TaskResult(t *testing.T) {
	g, direct := mediaGateway(t, "")
	want, _ := blob(t, callTool(t, direct, "picture", nil))
	c := dialTasks(t, g, nil)
	tk := c.create(t, "mcp__demo__picture", nil, 60000)
	raw := c.result(t, tk.TaskID)
	var res struct {
		Content []struct{ Type, URI, MIMEType string }
	}
	json.Unmarshal(raw, &res)
	if len(res.Content) != 1 || res.Content[0].Type != "resource_link" || !mediaURL.MatchString(res.Content[0].URI) {
		t.Fatalf("tasks/result = %.300s, want a media link", raw)
	}
	if resp, body := fetch(t, res.Content[0].URI, nil); resp.StatusCode != 200 || !bytes.Equal(body, want) {
		t.Errorf("GET the task result's link = %d, %d bytes (same: %v)", resp.StatusCode, len(body), bytes.Equal(body, want))
	}
}
