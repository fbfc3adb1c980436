package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resourceServer is a Go SDK MCP server over streamable HTTP, served in
// this process on 127.0.0.1, whose resources share the demo:// scheme with
// the other resourceServers of a test:
//
//	demo://resource/static/1                   answers "<name>:<uri asked>"
//	demo://resource/dynamic/text/{resourceId}  answers "<name>:<uri asked>"
//	demo://files/{+path}                       a file server: it decodes
//	                                           the path as Go's url.Parse
//	                                           does, resolves its dot
//	                                           segments and repeated or
//	                                           trailing slashes itself and
//	                                           answers
//	                                           "<name>:file <clean path>"
//
// Its completions answer the one value "<name>:<ref uri>", and it has the
// tool ping, so that the gateway's merge of its lists can be waited for.
// Until up is set, every request gets 503: the server is down.
type resourceServer struct {
	URL string
	up  atomic.Bool
}

func startResourceServer(t *testing.T, name string, up bool) *resourceServer {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "v0.1.0"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{name + ":" + req.Params.Ref.URI}}}, nil
		},
	})
	echo := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: name + ":" + req.Params.URI}}}, nil
	}
	s.AddResource(&mcp.Resource{URI: "demo://resource/static/1", Name: "static", MIMEType: "text/plain"}, echo)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "demo://resource/dynamic/text/{resourceId}", Name: "dynamic", MIMEType: "text/plain"}, echo)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "demo://files/{+path}", Name: "files", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			u, err := url.Parse(req.Params.URI)
			if err != nil {
				return nil, err
			}
			p := path.Clean(u.Path)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: name + ":file " + p}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "ping", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong"}}}, nil
	})
	rs := &resourceServer{}
	rs.up.Store(up)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rs.up.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rs.URL = srv.URL
	return rs
}

// resourcesACLConfig is a gateway with alice and bob; bob may not read
// demo://files/secret (the servers' own form, which covers both).
func resourcesACLConfig(alpha, beta string) string {
	return fmt.Sprintf(`auth:
  api_keys:
    - {principal: alice, key_sha256: %q}
    - {principal: bob, key_sha256: %q}
acl:
  rules:
    - {effect: allow, servers: ["*"]}
    - {effect: deny, principals: [bob], resources: ["demo://files/secret"]}
servers:
  - {name: alpha, transport: http, url: %s, restart: {initial_backoff: 50ms, max_backoff: 200ms, max_attempts: 1000}}
  - {name: beta, transport: http, url: %s, restart: {initial_backoff: 50ms, max_backoff: 200ms, max_attempts: 1000}}
`, hashToken(resAliceKey), hashToken(resBobKey), alpha, beta)
}

const resAliceKey, resBobKey = "e2e-res-alice-key", "e2e-res-bob-key"

func dialKey(t *testing.T, g *gateway, key string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-resources", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: g.URL + "/mcp", HTTPClient: httpClientWith(key), DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// listing is what resources/list and resources/templates/list show.
type listing struct{ Resources, Templates []string }

func listResources(t *testing.T, cs *mcp.ClientSession) listing {
	t.Helper()
	var l listing
	for r, err := range cs.Resources(ctxT(t), nil) {
		if err != nil {
			t.Fatalf("listing resources: %v", err)
		}
		l.Resources = append(l.Resources, r.URI)
	}
	for r, err := range cs.ResourceTemplates(ctxT(t), nil) {
		if err != nil {
			t.Fatalf("listing resource templates: %v", err)
		}
		l.Templates = append(l.Templates, r.URITemplate)
	}
	slices.Sort(l.Resources)
	slices.Sort(l.Templates)
	return l
}

// TestResources_NamespacingAndAccess runs the gateway in front of two Go
// SDK servers that share the demo:// scheme, brought up in both orders:
//
//   - the listing does not depend on which server came up first, and a
//     URI listed while one server was down keeps its form when the other
//     comes up (namespacing follows the config's order);
//   - every listed resource reads, every listed template completes and
//     reads an expansion, in exactly the listed form, on the server that
//     listed it;
//   - bob, whom a rule denies demo://files/secret, cannot read it under
//     any spelling that the file servers would resolve to it, in either
//     server's form; alice reads those, and the server gets the
//     normalized URI; a spelling that only decoding makes a path to it
//     (an encoded "/" or "\", dot segments encoded twice) is refused to
//     both.
func TestResources_NamespacingAndAccess(t *testing.T) {
	want := listing{
		Resources: []string{"demo://resource/static/1", "mcp+beta+demo://resource/static/1"},
		Templates: []string{
			"demo://files/{+path}", "demo://resource/dynamic/text/{resourceId}",
			"mcp+beta+demo://files/{+path}", "mcp+beta+demo://resource/dynamic/text/{resourceId}",
		},
	}
	for _, late := range []string{"alpha", "beta"} {
		t.Run(late+" comes up last", func(t *testing.T) {
			alpha := startResourceServer(t, "alpha", late != "alpha")
			beta := startResourceServer(t, "beta", late != "beta")
			g := startGateway(t, baseEnv(), resourcesACLConfig(alpha.URL, beta.URL))
			early := map[string]string{"alpha": "beta", "beta": "alpha"}[late]
			g.waitState(t, early, "running")
			alice := dialKey(t, g, resAliceKey)

			// Only the early server is listed, already in its final form.
			first := listResources(t, alice)
			keep := func(ss []string) []string {
				return slices.DeleteFunc(slices.Clone(ss), func(s string) bool {
					return strings.HasPrefix(s, "mcp+beta+") != (early == "beta")
				})
			}
			if diff := cmp.Diff(listing{keep(want.Resources), keep(want.Templates)}, first); diff != "" {
				t.Errorf("listing with only %s up (-want +got):\n%s", early, diff)
			}
			map[string]*resourceServer{"alpha": alpha, "beta": beta}[late].up.Store(true)
			g.waitState(t, late, "running")
			if diff := cmp.Diff(want, listResources(t, alice)); diff != "" {
				t.Errorf("listing with both up (-want +got):\n%s", diff)
			}

			checkListedForms(t, alice, want)
			checkAliases(t, g, alice)
		})
	}
}

// origin returns the server of a listed URI: alpha, the first in the
// config, keeps its URIs as they are.
func origin(listed string) string {
	if strings.HasPrefix(listed, "mcp+beta+") {
		return "beta"
	}
	return "alpha"
}

// texts returns the texts of a read's contents.
func texts(res *mcp.ReadResourceResult) []string {
	var out []string
	for _, c := range res.Contents {
		out = append(out, c.URI+" "+c.Text)
	}
	return out
}

func checkListedForms(t *testing.T, cs *mcp.ClientSession, l listing) {
	t.Helper()
	for _, uri := range l.Resources {
		res, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Errorf("reading listed %s: %v", uri, err)
			continue
		}
		own := strings.TrimPrefix(uri, "mcp+beta+")
		if len(res.Contents) != 1 || res.Contents[0].Text != origin(uri)+":"+own || res.Contents[0].URI != uri {
			t.Errorf("reading listed %s gave %q, want the text %q", uri, texts(res), origin(uri)+":"+own)
		}
	}
	for _, tmpl := range l.Templates {
		own := strings.TrimPrefix(tmpl, "mcp+beta+")
		res, err := cs.Complete(ctxT(t), &mcp.CompleteParams{
			Ref:      &mcp.CompleteReference{Type: "ref/resource", URI: tmpl},
			Argument: mcp.CompleteParamsArgument{Name: "resourceId", Value: "1"},
		})
		if err != nil {
			t.Errorf("completing listed template %s: %v", tmpl, err)
		} else if want := []string{origin(tmpl) + ":" + own}; !slices.Equal(res.Completion.Values, want) {
			t.Errorf("completing listed template %s gave %q, want %q", tmpl, res.Completion.Values, want)
		}
		uri := strings.NewReplacer("{resourceId}", "7", "{+path}", "doc").Replace(tmpl)
		rr, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Errorf("reading %s of listed template %s: %v", uri, tmpl, err)
			continue
		}
		if len(rr.Contents) != 1 || !strings.HasPrefix(rr.Contents[0].Text, origin(tmpl)+":") {
			t.Errorf("reading %s of listed template %s gave %q, want an answer of %s", uri, tmpl, texts(rr), origin(tmpl))
		}
	}
}

func checkAliases(t *testing.T, g *gateway, alice *mcp.ClientSession) {
	t.Helper()
	bob := dialKey(t, g, resBobKey)
	for _, form := range []string{"", "mcp+alpha+", "mcp+beta+"} {
		for _, spelling := range []string{
			"demo://files/secret",
			"demo://files/./secret",
			"demo://files/x/../secret",
			"demo://files//secret",
			"demo://files/secret/",
			"DEMO://files/secret",
			"demo://FILES/secret",
			"demo://files/%73ecret",
			"demo://files/%2E/secret",
		} {
			uri := form + spelling
			owner := "alpha"
			if form == "mcp+beta+" {
				owner = "beta"
			}
			res, err := bob.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: uri})
			if err == nil {
				t.Errorf("bob read %s: %q, want it refused", uri, texts(res))
			} else if !strings.Contains(err.Error(), "-31004") && !strings.Contains(err.Error(), "not allowed") {
				t.Errorf("bob reading %s: %v, want -31004 not allowed", uri, err)
			}
			if strings.Contains(spelling, "//secret") || strings.HasSuffix(spelling, "/") {
				continue // forwarded as it is; the ACL decides on the stricter key
			}
			// alice may: the server gets the normalized URI.
			res, err = alice.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: uri})
			if err != nil {
				t.Errorf("alice reading %s: %v", uri, err)
				continue
			}
			if want := owner + ":file /secret"; len(res.Contents) != 1 || res.Contents[0].Text != want {
				t.Errorf("alice reading %s gave %q, want %q", uri, texts(res), want)
			}
		}
	}
	for _, form := range []string{"", "mcp+alpha+", "MCP+Beta+"} {
		for _, spelling := range []string{
			"demo://files/x/..%2Fsecret",
			"demo://files/x%2F..%2Fsecret",
			"demo://files/x/..%252Fsecret",
			"demo://files/x/%252E%252E/secret",
			"demo://files/x/..%5Csecret",
		} {
			uri := form + spelling
			for who, cs := range map[string]*mcp.ClientSession{"alice": alice, "bob": bob} {
				res, err := cs.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: uri})
				if err == nil {
					t.Errorf("%s read %s: %q, want it refused", who, uri, texts(res))
				} else if !strings.Contains(err.Error(), "resource URI refused") {
					t.Errorf("%s reading %s: %v, want the URI refused", who, uri, err)
				}
			}
		}
	}
	res, err := alice.ReadResource(ctxT(t), &mcp.ReadResourceParams{URI: "mcp+beta+DEMO://files/x/./../secret"})
	if err != nil {
		t.Fatalf("alice reading an alias: %v", err)
	}
	if want := "beta:file /secret"; len(res.Contents) != 1 || res.Contents[0].Text != want || res.Contents[0].URI != "mcp+beta+demo://files/secret" {
		t.Errorf("alice reading an alias gave %q, want %q from the normalized URI mcp+beta+demo://files/secret", texts(res), want)
	}
}

// TestResources_ReloadOrder reloads the config with its servers reordered,
// one removed and one added back first, and checks after each reload that
// the listing is the one a gateway started on that file shows: which
// server keeps its URIs bare follows the file in effect, not the one the
// gateway started with.
func TestResources_ReloadOrder(t *testing.T) {
	urls := map[string]string{
		"alpha": startResourceServer(t, "alpha", true).URL,
		"beta":  startResourceServer(t, "beta", true).URL,
	}
	config := func(order ...string) string {
		c := fmt.Sprintf("auth:\n  api_keys:\n    - {principal: alice, key_sha256: %q}\nservers:\n", hashToken(resAliceKey))
		for _, name := range order {
			c += fmt.Sprintf("  - {name: %s, transport: http, url: %s}\n", name, urls[name])
		}
		return c
	}
	dir := t.TempDir()
	g := startGatewayIn(t, dir, config("alpha", "beta"))
	g.waitState(t, "alpha", "running")
	g.waitState(t, "beta", "running")
	alice := dialKey(t, g, resAliceKey)
	if got := listResources(t, alice); !slices.Contains(got.Resources, "demo://resource/static/1") || !slices.Contains(got.Resources, "mcp+beta+demo://resource/static/1") {
		t.Fatalf("listing at start = %v, want alpha bare and beta namespaced", got)
	}
	path := dir + "/mcpgw.yaml"
	head, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	settings, _, _ := strings.Cut(string(head), "auth:\n")
	for _, order := range [][]string{{"beta", "alpha"}, {"beta"}, {"alpha", "beta"}} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			if err := os.WriteFile(path, []byte(settings+config(order...)), 0o600); err != nil {
				t.Fatal(err)
			}
			if status, body := g.adminDo(t, "POST", "/admin/reload", g.Admin, ""); status != http.StatusOK {
				t.Fatalf("POST /admin/reload = %d %s", status, body)
			}
			for _, name := range order {
				g.waitState(t, name, "running")
			}
			got := listResources(t, alice)

			fresh := startGateway(t, baseEnv(), config(order...))
			for _, name := range order {
				fresh.waitState(t, name, "running")
			}
			want := listResources(t, dialKey(t, fresh, resAliceKey))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("listing after the reload (-fresh start +reloaded):\n%s\ngateway log:\n%s", diff, g.Stderr())
			}
		})
	}
}
